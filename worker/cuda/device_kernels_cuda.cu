// DeviceKernels on a real GPU: the kernel templates launched with CudaLauncher on the CUDA
// runtime's stream (nvcc; captured into CUDA graphs by the runtime's stream capture).
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/device/cuda_device_runtime.h"
#include "worker/cuda/device_kernels_impl.h"

namespace tessera::worker {
namespace {

absl::Status CudaLaunchStatus(cudaError_t error) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("kernel launch failed: ", cudaGetErrorString(error)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceKernels>> MakeCudaKernels(device::DeviceRuntime& runtime) {
  auto& cuda_runtime = static_cast<device::CudaDeviceRuntime&>(runtime);
  return std::make_unique<DeviceKernelsFor<cuda::CudaLauncher, decltype(&CudaLaunchStatus)>>(
      cuda::CudaLauncher(cuda_runtime.stream()), &CudaLaunchStatus);
}

}  // namespace tessera::worker
