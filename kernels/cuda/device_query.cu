#include "kernels/cuda/device_query.h"

#include <cuda_runtime.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::cuda {
namespace {

// UNAVAILABLE only for the errors that mean "no GPU here" — no device, no driver (or one too old
// for this runtime, or only the stub library) — so callers may skip; any other error is a fault
// (INTERNAL) that must not read as "no GPU".
absl::Status CudaError(const char* what, cudaError_t error) {
  const std::string message = absl::StrCat(what, " failed: ", cudaGetErrorName(error), " (",
                                           cudaGetErrorString(error), ")");
  const bool no_gpu = error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver ||
                      error == cudaErrorStubLibrary;
  return no_gpu ? absl::UnavailableError(message) : absl::InternalError(message);
}

}  // namespace

bool BuiltWithCuda() { return true; }

absl::StatusOr<std::vector<CudaDeviceInfo>> QueryCudaDevices() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return CudaError("cudaGetDeviceCount", error);
  }
  if (count == 0) return absl::UnavailableError("no CUDA device is visible");
  std::vector<CudaDeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    error = cudaGetDeviceProperties(&prop, i);
    if (error != cudaSuccess) return CudaError("cudaGetDeviceProperties", error);
    devices.push_back({.index = i,
                       .name = prop.name,
                       .compute_major = prop.major,
                       .compute_minor = prop.minor,
                       .total_memory_bytes = prop.totalGlobalMem,
                       .multiprocessor_count = prop.multiProcessorCount});
  }
  return devices;
}

absl::StatusOr<CudaVersions> QueryCudaVersions() {
  CudaVersions versions;
  cudaError_t error = cudaRuntimeGetVersion(&versions.runtime_version);
  if (error != cudaSuccess) return CudaError("cudaRuntimeGetVersion", error);
  // Without a driver this reports 0 and succeeds; that is the answer, not an error.
  if (cudaDriverGetVersion(&versions.driver_version) != cudaSuccess) versions.driver_version = 0;
  return versions;
}

}  // namespace tessera::cuda
