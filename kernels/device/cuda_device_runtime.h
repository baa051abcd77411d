// The device runtime on a real GPU: the CUDA runtime API on one non-blocking stream, stream
// capture into CUDA graphs, events, pinned host memory, and cuBLAS (cublasGemmEx, f32 compute)
// for GEMM with one workspace allocated at open (so captured GEMMs never allocate their own
// after the KV pool took the memory). Host code only (g++); kernels are launched with
// cuda::CudaLauncher on stream() with launch_device() and sync_each_launch(). Built only with
// CUDA.
//
// Threading: used by one thread at a time, but not always the same one (the loader thread
// builds the runner, the step thread runs it): every call first makes this runtime's device
// current on the calling thread (kernels/cuda/cuda_current_device.h).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "kernels/device/device_runtime.h"

namespace tessera::device {

class CudaDeviceRuntime final : public DeviceRuntime {
 public:
  // UNAVAILABLE / FAILED_PRECONDITION as OpenDevice documents.
  // sync_each_launch, dependent_launch: DeviceOptions::cuda_sync_each_launch and
  // cuda_dependent_launch.
  static absl::StatusOr<std::unique_ptr<CudaDeviceRuntime>> Open(int device_index,
                                                                 bool sync_each_launch = false,
                                                                 bool dependent_launch = true);
  ~CudaDeviceRuntime() override;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  const DeviceProperties& properties() const override { return properties_; }
  absl::StatusOr<uint64_t> FreeMemoryBytes() override;

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* device_pointer) override;
  absl::StatusOr<void*> AllocateHost(size_t bytes) override;
  void FreeHost(void* host_pointer) override;
  absl::Status CopyToDevice(void* device_destination, const void* host_source,
                            size_t bytes) override;
  absl::Status CopyToHost(void* host_destination, const void* device_source,
                          size_t bytes) override;
  absl::Status CopyOnDevice(void* device_destination, const void* device_source,
                            size_t bytes) override;
  absl::Status Fill(void* device_destination, uint8_t byte, size_t bytes) override;
  absl::Status Synchronize() override;

  absl::StatusOr<EventHandle> CreateEvent() override;
  absl::Status RecordEvent(EventHandle event) override;
  absl::StatusOr<double> ElapsedSeconds(EventHandle start, EventHandle end) override;

  absl::Status BeginCapture() override;
  absl::StatusOr<GraphHandle> EndCapture() override;
  absl::Status Replay(GraphHandle graph) override;
  bool capturing() const override { return capturing_; }

  absl::Status Gemm(const GemmArgs& args) override;

  cudaStream_t stream() const { return stream_; }
  int device_index() const { return device_index_; }
  bool sync_each_launch() const { return sync_each_launch_; }
  bool dependent_launch() const { return dependent_launch_; }
  // cuBLAS's workspace, set before any capture (Hopper wants 32 MiB for its fastest kernels).
  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

 private:
  CudaDeviceRuntime() = default;
  absl::Status Initialize();
  // Makes this runtime's device current on the calling thread.
  absl::Status UseDevice() const;
  // With sync_each_launch outside capture: waits, naming `what` if the work it enqueued failed.
  absl::Status SyncIfDebugging(const char* what);

  int device_index_ = 0;
  bool sync_each_launch_ = false;
  bool dependent_launch_ = true;
  void* cublas_workspace_ = nullptr;
  DeviceProperties properties_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  bool capturing_ = false;
  std::vector<cudaEvent_t> events_;
  std::vector<cudaGraphExec_t> graphs_;
};

}  // namespace tessera::device
