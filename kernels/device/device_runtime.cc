#include "kernels/device/device_runtime.h"

#include "absl/strings/str_cat.h"
#include "kernels/device/emulated_device_runtime.h"
#if TESSERA_WITH_CUDA
#include "kernels/device/cuda_device_runtime.h"
#endif

namespace tessera::device {

std::string_view DeviceKindName(DeviceKind kind) {
  return kind == DeviceKind::kCuda ? "cuda" : "emulated";
}

size_t DataTypeBytes(DataType type) { return type == DataType::kF32 ? 4 : 2; }

absl::Status ValidateGemm(const GemmArgs& args) {
  if (args.m <= 0 || args.n <= 0 || args.k <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM shape m=", args.m, " n=", args.n, " k=", args.k, " must be positive"));
  }
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) {
    return absl::InvalidArgumentError("GEMM operand pointer is null");
  }
  return absl::OkStatus();
}

const char* DataTypeName(DataType type) {
  switch (type) {
    case DataType::kBf16: return "bf16";
    case DataType::kF16: return "f16";
    case DataType::kF32: return "f32";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<DeviceRuntime>> OpenDevice(const DeviceOptions& options) {
  if (options.kind == DeviceKind::kEmulated) {
    return std::make_unique<EmulatedDeviceRuntime>(options.emulated_memory_bytes,
                                                   simt::Schedule::InOrder());
  }
#if TESSERA_WITH_CUDA
  absl::StatusOr<std::unique_ptr<CudaDeviceRuntime>> runtime =
      CudaDeviceRuntime::Open(options.cuda_device_index, options.cuda_sync_each_launch,
                              options.cuda_dependent_launch);
  if (!runtime.ok()) return runtime.status();
  return std::unique_ptr<DeviceRuntime>(std::move(*runtime));
#else
  return absl::UnavailableError("this build of tessera has no CUDA backend (configured without nvcc)");
#endif
}

}  // namespace tessera::device
