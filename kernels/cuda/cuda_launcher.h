// The Launcher (launch_shape.h) for a real GPU: the one place `<<<>>>` is written. nvcc only:
// included from .cu files (never from a .cuh, which g++ also compiles for the emulator).
//
// A launch returns a CudaLaunchResult: the launch error (bad configuration, too much shared
// memory) and the kernel it concerns, so every failure can name its kernel (DescribeLaunch).
// Errors of the kernel's execution surface at the next synchronisation, as in CUDA, unless the
// launcher syncs after each launch (`--cuda-sync-each-launch`, for bring-up): then a fault is
// reported by the launch that caused it. Launches first make the launcher's device current on
// the calling thread (cuda_current_device.h). Thread-compatible.
#pragma once

#include <cuda_runtime.h>

#include <cxxabi.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_current_device.h"
#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

struct CudaLaunchOptions {
  int device = -1;                // made current before each launch; -1: the thread's current
  bool sync_each_launch = false;  // wait for each kernel outside graph capture (bring-up)
  // Launch LaunchShape::dependent kernels as programmatic dependents (sm_90+; their wait is a
  // no-op on a plain launch). H200: batch-1 packed decode steps 3-4% faster, bf16 and batch 8
  // unchanged (docs/perf/packed-stream.md).
  bool dependent_launch = true;
};

struct CudaLaunchResult {
  cudaError_t error = cudaSuccess;
  const void* kernel = nullptr;
  // Resolved before a sync-each-launch wait: after a device fault the context is gone and CUDA
  // can no longer name the kernel. Empty otherwise (named on demand by DescribeLaunch).
  std::string kernel_name;
  bool ok() const { return error == cudaSuccess; }
};

// The kernel's demangled name ("void tessera::cuda::RmsNormKernel<float>(...)"), or "kernel
// <address>" when CUDA cannot name it.
inline std::string KernelName(const void* kernel) {
  const char* mangled = nullptr;
  if (kernel == nullptr || cudaFuncGetName(&mangled, kernel) != cudaSuccess || !mangled) {
    cudaGetLastError();
    return "kernel at " + std::to_string(reinterpret_cast<uintptr_t>(kernel));
  }
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  return name;
}

// "<kernel name>: cudaErrorX (description)" for a failed launch.
inline std::string DescribeLaunch(const CudaLaunchResult& result) {
  const std::string name =
      result.kernel_name.empty() ? KernelName(result.kernel) : result.kernel_name;
  return name + ": " + cudaGetErrorName(result.error) + " (" + cudaGetErrorString(result.error) +
         ")";
}

class CudaLauncher {
 public:
  explicit CudaLauncher(cudaStream_t stream, CudaLaunchOptions options = {})
      : stream_(stream), options_(options) {}

  template <typename... Params, typename... Args>
  CudaLaunchResult Launch(const LaunchShape& shape, void (*kernel)(Params...), Args&&... args) {
    const CudaLaunchResult failed_device{UseDeviceOnThisThread(options_.device),
                                         reinterpret_cast<const void*>(kernel), {}};
    if (!failed_device.ok()) return failed_device;
    if (shape.dependent && options_.dependent_launch) {
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attribute.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t config{shape.grid, shape.block, shape.dynamic_shared_bytes, stream_,
                                &attribute, 1};
      cudaLaunchKernelEx(&config, kernel, static_cast<Params>(std::forward<Args>(args))...);
    } else {
      kernel<<<shape.grid, shape.block, shape.dynamic_shared_bytes, stream_>>>(
          static_cast<Params>(std::forward<Args>(args))...);
    }
    CudaLaunchResult result{cudaGetLastError(), reinterpret_cast<const void*>(kernel), {}};
    if (result.ok() && options_.sync_each_launch && !Capturing()) {
      result.kernel_name = KernelName(result.kernel);
      result.error = cudaStreamSynchronize(stream_);
    }
    return result;
  }

  // cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes): launches
  // may then pass up to `bytes` of dynamic shared memory (CUDA allows 48 KiB in all without).
  template <typename... Params>
  CudaLaunchResult AllowDynamicShared(void (*kernel)(Params...), size_t bytes) {
    CudaLaunchResult result{UseDeviceOnThisThread(options_.device),
                            reinterpret_cast<const void*>(kernel), {}};
    if (result.ok()) {
      result.error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes));
    }
    if (!result.ok()) cudaGetLastError();
    return result;
  }

  cudaStream_t stream() const { return stream_; }

 private:
  bool Capturing() const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(stream_, &status) != cudaSuccess ||
           status != cudaStreamCaptureStatusNone;
  }

  cudaStream_t stream_;
  CudaLaunchOptions options_;
};

}  // namespace tessera::cuda
