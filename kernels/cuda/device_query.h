// Which CUDA devices this process can use, and what the CUDA runtime/driver are.
// Plain C++ header (no CUDA types) so host-only code can call it. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::cuda {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;       // e.g. 9 for Hopper
  int compute_minor = 0;
  uint64_t total_memory_bytes = 0;
  int multiprocessor_count = 0;
};

struct CudaVersions {
  int runtime_version = 0;     // CUDART_VERSION style: 13000 for 13.0
  int driver_version = 0;      // 0 when no driver is installed
};

// True when this binary was compiled with the CUDA backend.
bool BuiltWithCuda();

// UNAVAILABLE (with the runtime's reason) when the build has no CUDA, no driver is installed or
// no device is visible; INTERNAL for any other CUDA error; otherwise one entry per visible device.
absl::StatusOr<std::vector<CudaDeviceInfo>> QueryCudaDevices();

// Works without a GPU; UNAVAILABLE only when the build has no CUDA.
absl::StatusOr<CudaVersions> QueryCudaVersions();

}  // namespace tessera::cuda
