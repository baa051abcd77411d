#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "kernels/cuda/device_query.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

// No GPU is an answer, not an error: it is said on stdout and the command exits 0.
absl::Status RunDevices() {
  absl::StatusOr<cuda::CudaVersions> versions = cuda::QueryCudaVersions();
  if (!versions.ok() && versions.status().code() == absl::StatusCode::kUnavailable) {
    std::printf("no CUDA GPU: %s\n", std::string(versions.status().message()).c_str());
    return absl::OkStatus();
  }
  if (!versions.ok()) return versions.status();
  std::printf("cuda runtime %d.%d, driver %d.%d\n", versions->runtime_version / 1000,
              versions->runtime_version % 1000 / 10, versions->driver_version / 1000,
              versions->driver_version % 1000 / 10);
  absl::StatusOr<std::vector<cuda::CudaDeviceInfo>> devices = cuda::QueryCudaDevices();
  if (!devices.ok() && devices.status().code() == absl::StatusCode::kUnavailable) {
    std::printf("no CUDA GPU: %s\n", std::string(devices.status().message()).c_str());
    return absl::OkStatus();
  }
  if (!devices.ok()) return devices.status();
  for (const cuda::CudaDeviceInfo& d : *devices) {
    std::printf("%s\n", absl::StrFormat("[%d] %s  sm_%d%d  %.1f GiB  %d SMs", d.index, d.name,
                                        d.compute_major, d.compute_minor,
                                        d.total_memory_bytes / double(1 << 30),
                                        d.multiprocessor_count).c_str());
  }
  return absl::OkStatus();
}

}  // namespace tessera::cli
