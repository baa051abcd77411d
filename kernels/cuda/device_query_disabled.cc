// The device-query API for builds without CUDA (TESSERA_CUDA=OFF or no nvcc at configure time).
#include "absl/status/status.h"
#include "kernels/cuda/device_query.h"

namespace tessera::cuda {
namespace {
constexpr char kNoCuda[] = "this build of tessera has no CUDA backend (configured with CUDA off)";
}  // namespace

bool BuiltWithCuda() { return false; }

absl::StatusOr<std::vector<CudaDeviceInfo>> QueryCudaDevices() {
  return absl::UnavailableError(kNoCuda);
}

absl::StatusOr<CudaVersions> QueryCudaVersions() { return absl::UnavailableError(kNoCuda); }

}  // namespace tessera::cuda
