#include "kernels/cpu/weight_format.h"

#include "common/util/check.h"

namespace tessera::kernels::cpu {

std::string_view WeightFormatName(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return "F32";
    case WeightFormat::kF16:
      return "F16";
    case WeightFormat::kBF16:
      return "BF16";
    case WeightFormat::kQ8_0:
      return "Q8_0";
    case WeightFormat::kQ4_0:
      return "Q4_0";
    case WeightFormat::kQ4_1:
      return "Q4_1";
    case WeightFormat::kMxfp4:
      return "MXFP4";
    case WeightFormat::kNvfp4:
      return "NVFP4";
  }
  return "unknown";
}

gguf::GgmlType ToGgmlType(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32: return gguf::GgmlType::kF32;
    case WeightFormat::kF16: return gguf::GgmlType::kF16;
    case WeightFormat::kBF16: return gguf::GgmlType::kBF16;
    case WeightFormat::kQ8_0: return gguf::GgmlType::kQ8_0;
    case WeightFormat::kQ4_0: return gguf::GgmlType::kQ4_0;
    case WeightFormat::kQ4_1: return gguf::GgmlType::kQ4_1;
    case WeightFormat::kMxfp4: return gguf::GgmlType::kMxfp4;
    case WeightFormat::kNvfp4: return gguf::GgmlType::kNvfp4;
  }
  TESSERA_CHECK(false, "ToGgmlType: not a WeightFormat value");
}

std::optional<WeightFormat> WeightFormatFromGgml(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kF32: return WeightFormat::kF32;
    case gguf::GgmlType::kF16: return WeightFormat::kF16;
    case gguf::GgmlType::kBF16: return WeightFormat::kBF16;
    case gguf::GgmlType::kQ8_0: return WeightFormat::kQ8_0;
    case gguf::GgmlType::kQ4_0: return WeightFormat::kQ4_0;
    case gguf::GgmlType::kQ4_1: return WeightFormat::kQ4_1;
    case gguf::GgmlType::kMxfp4: return WeightFormat::kMxfp4;
    case gguf::GgmlType::kNvfp4: return WeightFormat::kNvfp4;
    default: return std::nullopt;
  }
}

int64_t FormatBlockElements(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
    case WeightFormat::kF16:
    case WeightFormat::kBF16:
      return 1;
    case WeightFormat::kQ8_0:
    case WeightFormat::kQ4_0:
    case WeightFormat::kQ4_1:
    case WeightFormat::kMxfp4:
      return kQuantBlockSize;
    case WeightFormat::kNvfp4:
      return 2 * kQuantBlockSize;
  }
  return 1;
}

size_t FormatBlockBytes(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return 4;
    case WeightFormat::kF16:
    case WeightFormat::kBF16:
      return 2;
    case WeightFormat::kQ8_0:
      return 34;
    case WeightFormat::kQ4_0:
      return 18;
    case WeightFormat::kQ4_1:
      return 20;
    case WeightFormat::kMxfp4:
      return 17;
    case WeightFormat::kNvfp4:
      return 36;
  }
  return 4;
}

size_t RowBytes(WeightFormat format, int64_t cols) {
  const int64_t block = FormatBlockElements(format);
  TESSERA_CHECK(cols >= 0 && cols % block == 0,
                "row length must be a multiple of the format's block size");
  return static_cast<size_t>(cols / block) * FormatBlockBytes(format);
}

}  // namespace tessera::kernels::cpu
