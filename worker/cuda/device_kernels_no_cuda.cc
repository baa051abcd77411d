// MakeCudaKernels in builds without CUDA: a `cuda` runtime cannot exist there, so this only
// answers a caller that got one some other way.
#include "worker/cuda/device_kernels.h"

namespace tessera::worker {

absl::StatusOr<std::unique_ptr<DeviceKernels>> MakeCudaKernels(device::DeviceRuntime&) {
  return absl::UnavailableError("this build has no CUDA: it cannot launch kernels on a GPU");
}

}  // namespace tessera::worker
