// Reference encoders, round-to-nearest as ggml's quantize_row_*_ref, used to build test models.
// The scale is computed in f32 and stored as a half; codes use the unrounded inverse scale, as in
// ggml, so encoding a block here gives the same bytes ggml's reference quantizer gives.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/gguf/dequantize.h"
#include "common/gguf/quantize_fp4.h"

namespace tessera::gguf {
namespace {

void StoreU16(uint16_t v, uint8_t* p) {
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// ggml converts `x + bias` to int8 by truncation and clamps at `max_code`; this does the same for
// in-range inputs without undefined behaviour for out-of-range or NaN ones (they clamp to 0/max).
int TruncateClamp(float x, int max_code) {
  if (x >= static_cast<float>(max_code)) return max_code;
  if (x > 0.0f) return static_cast<int>(x);
  return 0;
}

// Value with the largest magnitude (the first one on ties), keeping its sign.
float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* min, float* max) {
  *min = std::numeric_limits<float>::max();
  *max = -std::numeric_limits<float>::max();
  for (int j = 0; j < n; ++j) {
    *min = std::min(*min, x[j]);
    *max = std::max(*max, x[j]);
  }
}

void EncodeQ4_0(const float* x, uint8_t* block) {
  const float d = SignedAbsMax(x, 32) / -8;  // the extreme value maps to code 0 (-8 * d)
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(FloatToHalf(d), block);
  for (int j = 0; j < 16; ++j) {
    const int lo = TruncateClamp(x[j] * id + 8.5f, 15);
    const int hi = TruncateClamp(x[j + 16] * id + 8.5f, 15);
    block[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void EncodeQ4_1(const float* x, uint8_t* block) {
  float min, max;
  MinMax(x, 32, &min, &max);
  const float d = (max - min) / 15;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(FloatToHalf(d), block);
  StoreU16(FloatToHalf(min), block + 2);
  for (int j = 0; j < 16; ++j) {
    const int lo = TruncateClamp((x[j] - min) * id + 0.5f, 15);
    const int hi = TruncateClamp((x[j + 16] - min) * id + 0.5f, 15);
    block[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Q5: low nibbles as in Q4, fifth bits gathered into a little-endian u32 at `qh`.
void PackQ5(const int* codes, uint8_t* qh, uint8_t* qs) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4));
    high |= static_cast<uint32_t>((codes[j] >> 4) & 1) << j;
    high |= static_cast<uint32_t>((codes[j + 16] >> 4) & 1) << (j + 16);
  }
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(high >> (8 * b));
}

void EncodeQ5_0(const float* x, uint8_t* block) {
  const float d = SignedAbsMax(x, 32) / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(FloatToHalf(d), block);
  int codes[32];
  for (int j = 0; j < 32; ++j) codes[j] = TruncateClamp(x[j] * id + 16.5f, 31);
  PackQ5(codes, block + 2, block + 6);
}

void EncodeQ5_1(const float* x, uint8_t* block) {
  float min, max;
  MinMax(x, 32, &min, &max);
  const float d = (max - min) / 31;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(FloatToHalf(d), block);
  StoreU16(FloatToHalf(min), block + 2);
  int codes[32];
  for (int j = 0; j < 32; ++j) codes[j] = TruncateClamp((x[j] - min) * id + 0.5f, 31);
  PackQ5(codes, block + 4, block + 8);
}

void EncodeQ8_0(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(FloatToHalf(d), block);
  for (int j = 0; j < 32; ++j) {
    // roundf: halves away from zero, as ggml. |x * id| <= 127 up to rounding; clamp anyway.
    const float q = std::clamp(std::round(x[j] * id), -128.0f, 127.0f);
    block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::isnan(q) ? 0.0f : q));
  }
}

void EncodeMxfp4(const float* x, uint8_t* block) {
  QuantizeMxfp4Block(std::span<const float, kMxfp4BlockElements>(x, kMxfp4BlockElements),
                     std::span<uint8_t, kMxfp4BlockBytes>(block, kMxfp4BlockBytes));
}

// Without a tensor scale (s = 1): the blocks alone decode to the values, as ggml's
// quantize_row_nvfp4_ref writes them. QuantizeNvfp4Tensor (quantize_fp4.h) is the two-level form.
void EncodeNvfp4(const float* x, uint8_t* block) {
  QuantizeNvfp4Block(std::span<const float, kNvfp4BlockElements>(x, kNvfp4BlockElements), 1.0f,
                     std::span<uint8_t, kNvfp4BlockBytes>(block, kNvfp4BlockBytes));
}

void EncodeF32(const float* x, uint8_t* out) { std::memcpy(out, x, sizeof(float)); }
void EncodeF16(const float* x, uint8_t* out) { StoreU16(FloatToHalf(*x), out); }
void EncodeBf16(const float* x, uint8_t* out) { StoreU16(FloatToBf16(*x), out); }

using BlockEncoder = void (*)(const float* x, uint8_t* block);

BlockEncoder FindEncoder(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return EncodeF32;
    case GgmlType::kF16: return EncodeF16;
    case GgmlType::kBF16: return EncodeBf16;
    case GgmlType::kQ4_0: return EncodeQ4_0;
    case GgmlType::kQ4_1: return EncodeQ4_1;
    case GgmlType::kQ5_0: return EncodeQ5_0;
    case GgmlType::kQ5_1: return EncodeQ5_1;
    case GgmlType::kQ8_0: return EncodeQ8_0;
    case GgmlType::kMxfp4: return EncodeMxfp4;
    case GgmlType::kNvfp4: return EncodeNvfp4;
    default: return nullptr;
  }
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> QuantizeFromF32(GgmlType type, std::span<const float> src) {
  const std::optional<GgmlTypeInfo> info = LookupGgmlType(static_cast<uint32_t>(type));
  const BlockEncoder encode = FindEncoder(type);
  if (!info.has_value() || encode == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("quantize: no reference encoder for ", GgmlTypeName(type)));
  }
  if (src.size() % info->block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("quantize: ", src.size(),
                                                   " values is not a multiple of the ", info->name,
                                                   " block size ", info->block_size));
  }
  const size_t num_blocks = src.size() / info->block_size;
  std::vector<uint8_t> out(num_blocks * info->type_size);
  for (size_t b = 0; b < num_blocks; ++b) {
    encode(src.data() + b * info->block_size, out.data() + b * info->type_size);
  }
  return out;
}

}  // namespace tessera::gguf
