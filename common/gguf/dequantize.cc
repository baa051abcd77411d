// DequantizeToF32 dispatch, plain float formats and the legacy 32-element quant blocks.
// Block layouts (ggml-common.h), all little-endian, d/m are IEEE halves:
//   Q4_0 {d, qs[16]}          x = (nibble - 8) * d
//   Q4_1 {d, m, qs[16]}       x = nibble * d + m
//   Q5_0 {d, qh[4], qs[16]}   x = ((nibble | high_bit << 4) - 16) * d
//   Q5_1 {d, m, qh[4], qs[16]} x = (nibble | high_bit << 4) * d + m
//   Q8_0 {d, qs[32] int8}     x = q * d
// In the 4/5-bit blocks byte j holds element j in its low nibble and element j+16 in its high
// nibble; qh bit j is the fifth bit of element j.
#include "common/gguf/dequantize.h"

#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/gguf/block_codec.h"

namespace tessera::gguf {
namespace internal {

void DecodeQ4_0(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint8_t* qs = block + 2;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    out[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void DecodeQ4_1(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float m = LoadHalf(block + 2);
  const uint8_t* qs = block + 4;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    out[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

namespace {

// The 5-bit codes of a Q5 block: low nibble from qs, fifth bit from the 32-bit qh mask.
void Q5Codes(uint32_t qh, const uint8_t* qs, int* codes) {
  for (int j = 0; j < 16; ++j) {
    codes[j] = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
    codes[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
  }
}

}  // namespace

void DecodeQ5_0(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  int codes[32];
  Q5Codes(LoadU32(block + 2), block + 6, codes);
  for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(codes[j] - 16) * d;
}

void DecodeQ5_1(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float m = LoadHalf(block + 2);
  int codes[32];
  Q5Codes(LoadU32(block + 4), block + 8, codes);
  for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(codes[j]) * d + m;
}

void DecodeQ8_0(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
}

}  // namespace internal

namespace {

using BlockDecoder = void (*)(const uint8_t* block, float* out);

void DecodeF32(const uint8_t* block, float* out) { *out = internal::LoadF32(block); }
void DecodeF16(const uint8_t* block, float* out) { *out = internal::LoadHalf(block); }
void DecodeBf16(const uint8_t* block, float* out) { *out = Bf16ToFloat(internal::LoadU16(block)); }

BlockDecoder FindDecoder(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return DecodeF32;
    case GgmlType::kF16: return DecodeF16;
    case GgmlType::kBF16: return DecodeBf16;
    case GgmlType::kQ4_0: return internal::DecodeQ4_0;
    case GgmlType::kQ4_1: return internal::DecodeQ4_1;
    case GgmlType::kQ5_0: return internal::DecodeQ5_0;
    case GgmlType::kQ5_1: return internal::DecodeQ5_1;
    case GgmlType::kQ8_0: return internal::DecodeQ8_0;
    case GgmlType::kMxfp4: return internal::DecodeMxfp4;
    case GgmlType::kNvfp4: return internal::DecodeNvfp4;
    case GgmlType::kQ2_K: return internal::DecodeQ2_K;
    case GgmlType::kQ3_K: return internal::DecodeQ3_K;
    case GgmlType::kQ4_K: return internal::DecodeQ4_K;
    case GgmlType::kQ5_K: return internal::DecodeQ5_K;
    case GgmlType::kQ6_K: return internal::DecodeQ6_K;
    case GgmlType::kQ8_K: return internal::DecodeQ8_K;
    default: return nullptr;  // Q8_1 (no ggml decoder), integer and F64 tensors
  }
}

// Validates type and sizes; returns the type's geometry. Runs before any allocation.
absl::StatusOr<GgmlTypeInfo> CheckSizes(GgmlType type, uint64_t src_bytes, uint64_t num_elements) {
  const std::optional<GgmlTypeInfo> info = LookupGgmlType(static_cast<uint32_t>(type));
  if (!info.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dequantize: unknown ggml type id ", static_cast<uint32_t>(type)));
  }
  if (FindDecoder(type) == nullptr) {
    return absl::UnimplementedError(absl::StrCat("dequantize: no decoder for ", info->name));
  }
  if (num_elements % info->block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize: ", num_elements,
                                                   " elements is not a multiple of the ",
                                                   info->name, " block size ", info->block_size));
  }
  const uint64_t num_blocks = num_elements / info->block_size;
  if (num_blocks > std::numeric_limits<uint64_t>::max() / info->type_size ||
      src_bytes != num_blocks * info->type_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("dequantize: ", num_elements, " ", info->name, " elements need ", num_blocks,
                     " blocks of ", info->type_size, " bytes, got ", src_bytes, " bytes"));
  }
  return *info;
}

}  // namespace

bool CanDequantize(GgmlType type) { return FindDecoder(type) != nullptr; }

absl::Status DequantizeToF32(GgmlType type, std::span<const uint8_t> src, uint64_t num_elements,
                             std::span<float> dst) {
  absl::StatusOr<GgmlTypeInfo> info = CheckSizes(type, src.size(), num_elements);
  if (!info.ok()) return info.status();
  if (dst.size() < num_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat("dequantize: destination holds ", dst.size(), " floats, need ", num_elements));
  }
  const BlockDecoder decode = FindDecoder(type);
  const uint64_t num_blocks = num_elements / info->block_size;
  const uint8_t* block = src.data();
  float* out = dst.data();
  for (uint64_t b = 0; b < num_blocks; ++b) {
    decode(block, out);
    block += info->type_size;
    out += info->block_size;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> DequantizeToF32(GgmlType type, std::span<const uint8_t> src,
                                                   uint64_t num_elements) {
  // Validate first: num_elements may come from an untrusted file, and src bounds it.
  if (absl::StatusOr<GgmlTypeInfo> info = CheckSizes(type, src.size(), num_elements); !info.ok()) {
    return info.status();
  }
  std::vector<float> out(num_elements);
  if (absl::Status s = DequantizeToF32(type, src, num_elements, out); !s.ok()) return s;
  return out;
}

}  // namespace tessera::gguf
