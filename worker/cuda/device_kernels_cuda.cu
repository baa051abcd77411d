// DeviceKernels on a real GPU: the kernel templates launched with CudaLauncher on the CUDA
// runtime's stream and device (captured into CUDA graphs by the runtime's stream capture); with
// --cuda-sync-each-launch every launch outside capture waits for its kernel. A failed launch
// names its kernel.
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/device/cuda_device_runtime.h"
#include "worker/cuda/device_kernels_impl.h"

namespace tessera::worker {
namespace {

absl::Status CudaLaunchStatus(const cuda::CudaLaunchResult& result) {
  if (result.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("kernel launch failed: ", cuda::DescribeLaunch(result)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceKernels>> MakeCudaKernels(device::DeviceRuntime& runtime) {
  auto& cuda_runtime = static_cast<device::CudaDeviceRuntime&>(runtime);
  const cuda::CudaLaunchOptions options{.device = cuda_runtime.device_index(),
                                        .sync_each_launch = cuda_runtime.sync_each_launch(),
                                        .dependent_launch = cuda_runtime.dependent_launch()};
  return std::make_unique<DeviceKernelsFor<cuda::CudaLauncher, decltype(&CudaLaunchStatus)>>(
      cuda::CudaLauncher(cuda_runtime.stream(), options), &CudaLaunchStatus);
}

}  // namespace tessera::worker
