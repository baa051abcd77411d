#include "common/gguf/ggml_type.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"

namespace tessera::gguf {
namespace {

// Block geometry from ggml-common.h: block_size elements are stored in type_size bytes.
// K-quants use super-blocks of QK_K = 256 elements.
constexpr std::array<GgmlTypeInfo, 22> kTypes = {{
    {GgmlType::kF32, "F32", 1, 4},
    {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", 32, 2 + 16},                  // d, qs[16]
    {GgmlType::kQ4_1, "Q4_1", 32, 2 + 2 + 16},              // d, m, qs[16]
    {GgmlType::kQ5_0, "Q5_0", 32, 2 + 4 + 16},              // d, qh[4], qs[16]
    {GgmlType::kQ5_1, "Q5_1", 32, 2 + 2 + 4 + 16},          // d, m, qh[4], qs[16]
    {GgmlType::kQ8_0, "Q8_0", 32, 2 + 32},                  // d, qs[32]
    {GgmlType::kQ8_1, "Q8_1", 32, 2 + 2 + 32},              // d, s, qs[32]
    {GgmlType::kQ2_K, "Q2_K", 256, 16 + 64 + 2 + 2},        // scales, qs, d, dmin
    {GgmlType::kQ3_K, "Q3_K", 256, 32 + 64 + 12 + 2},       // hmask, qs, scales, d
    {GgmlType::kQ4_K, "Q4_K", 256, 2 + 2 + 12 + 128},       // d, dmin, scales, qs
    {GgmlType::kQ5_K, "Q5_K", 256, 2 + 2 + 12 + 32 + 128},  // d, dmin, scales, qh, qs
    {GgmlType::kQ6_K, "Q6_K", 256, 128 + 64 + 16 + 2},      // ql, qh, scales, d
    {GgmlType::kQ8_K, "Q8_K", 256, 4 + 256 + 32},           // d (f32), qs, bsums[16] (i16)
    {GgmlType::kI8, "I8", 1, 1},
    {GgmlType::kI16, "I16", 1, 2},
    {GgmlType::kI32, "I32", 1, 4},
    {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},
    {GgmlType::kBF16, "BF16", 1, 2},
    {GgmlType::kMxfp4, "MXFP4", 32, 1 + 16},  // e (E8M0), qs[16]
    {GgmlType::kNvfp4, "NVFP4", 64, 4 + 32},  // d[4] (UE4M3), qs[32]
}};

const GgmlTypeInfo* Find(uint32_t raw_type) {
  for (const GgmlTypeInfo& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == raw_type) return &info;
  }
  return nullptr;
}

}  // namespace

std::optional<GgmlTypeInfo> LookupGgmlType(uint32_t raw_type) {
  const GgmlTypeInfo* info = Find(raw_type);
  if (info == nullptr) return std::nullopt;
  return *info;
}

const GgmlTypeInfo& GetGgmlTypeInfo(GgmlType type) {
  const GgmlTypeInfo* info = Find(static_cast<uint32_t>(type));
  TESSERA_CHECK(info != nullptr, "GetGgmlTypeInfo: not a valid GgmlType enumerator");
  return *info;
}

std::string GgmlTypeName(GgmlType type) {
  const GgmlTypeInfo* info = Find(static_cast<uint32_t>(type));
  if (info == nullptr) return absl::StrCat("unknown(", static_cast<uint32_t>(type), ")");
  return info->name;
}

}  // namespace tessera::gguf
