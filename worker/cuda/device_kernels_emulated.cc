// DeviceKernels on the emulated device: the kernel templates launched through the SIMT
// emulator's stream launcher (recorded into the graph while the runtime captures). The `cuda`
// half (device_kernels_cuda.cu) is compiled by nvcc in CUDA builds; without CUDA,
// MakeCudaKernels reports UNAVAILABLE (device_kernels_no_cuda.cc).
#include "kernels/device/emulated_device_runtime.h"
#include "worker/cuda/device_kernels_impl.h"

namespace tessera::worker {

absl::StatusOr<std::unique_ptr<DeviceKernels>> MakeDeviceKernels(device::DeviceRuntime& runtime) {
  if (runtime.kind() == device::DeviceKind::kCuda) return MakeCudaKernels(runtime);
  auto& emulated = static_cast<device::EmulatedDeviceRuntime&>(runtime);
  auto identity = [](absl::Status status) { return status; };
  return std::make_unique<DeviceKernelsFor<device::EmulatedStreamLauncher, decltype(identity)>>(
      emulated.launcher(), identity);
}

}  // namespace tessera::worker
