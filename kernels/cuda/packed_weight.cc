#include "kernels/cuda/packed_weight.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/half.h"

namespace tessera::cuda {
namespace {

uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// Nibble `element` of a 4-bit codes row (packed_format.h's order).
void SetNibble(uint8_t* row, int64_t element, unsigned q) {
  row[element / 2] |= static_cast<uint8_t>((q & 15u) << (4 * (element & 1)));
}
unsigned GetNibble(const uint8_t* row, int64_t element) {
  return (row[element / 2] >> (4 * (element & 1))) & 15u;
}

// An empty weight of the right sizes for (scheme, n, k), or why the shape is rejected.
absl::StatusOr<PackedWeight> EmptyWeight(PackedScheme scheme, int n, int k) {
  if (const char* error = PackedShapeError(scheme, n, k)) {
    return absl::InvalidArgumentError(absl::StrCat("packed weight [", n, ", ", k, "]: ", error));
  }
  PackedWeight w;
  w.scheme = scheme;
  w.n = n;
  w.k = k;
  const int64_t groups = int64_t{n} * (k / PackedGroupSize(scheme));
  w.codes.assign(n * PackedRowCodeBytes(scheme, k), 0);
  w.scales.assign(groups * PackedScaleBytes(scheme), 0);
  w.mins.assign(groups * PackedMinBytes(scheme), 0);
  if (scheme == PackedScheme::kQ4_K) w.super_scales.assign(int64_t{n} * (k / 256) * 2, 0);
  return w;
}

absl::Status CheckSize(const char* what, size_t got, size_t want) {
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("packed weight: ", what, " holds ", got, " bytes, expected ", want));
}

// ggml's get_scale_min_k4: the 6-bit scale and min of Q4_K sub-block j from its 12 bytes.
std::pair<uint8_t, uint8_t> ScaleMinK4(int j, const uint8_t* q) {
  if (j < 4) return {static_cast<uint8_t>(q[j] & 63), static_cast<uint8_t>(q[j + 4] & 63)};
  return {static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4))};
}

// One Q4_K block {d, dmin, scales[12], qs[128]}: 64-element chunk c holds elements 0..31 in the
// low nibbles of qs[32c..32c+31] (sub-block 2c) and 32..63 in the high nibbles (2c + 1).
void RepackQ4KBlock(const uint8_t* block, int64_t row, int64_t b, PackedWeight& w) {
  const int64_t groups_per_row = w.k / 32;
  uint16_t* super = &w.super_scales[(row * (w.k / 256) + b) * 2];
  super[0] = LoadU16(block);
  super[1] = LoadU16(block + 2);
  for (int j = 0; j < 8; ++j) {
    const auto [sc, mn] = ScaleMinK4(j, block + 4);
    w.scales[row * groups_per_row + 8 * b + j] = sc;
    w.mins[row * groups_per_row + 8 * b + j] = mn;
  }
  uint8_t* codes = &w.codes[row * (w.k / 2)];
  const uint8_t* qs = block + 16;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      SetNibble(codes, 256 * b + 64 * c + l, qs[32 * c + l]);
      SetNibble(codes, 256 * b + 64 * c + 32 + l, qs[32 * c + l] >> 4);
    }
  }
}

// One 32-element block of Q8_0 {d, qs[32]}, Q4_0 {d, qs[16]} or Q4_1 {d, m, qs[16]} (4-bit:
// byte j holds element j low, element j + 16 high).
void RepackLegacyBlock(gguf::GgmlType type, const uint8_t* block, int64_t row, int64_t b,
                       PackedWeight& w) {
  const int64_t group = row * (w.k / 32) + b;
  w.scales[2 * group] = block[0];
  w.scales[2 * group + 1] = block[1];
  if (type == gguf::GgmlType::kQ8_0) {
    std::copy(block + 2, block + 34, &w.codes[row * w.k + 32 * b]);
    return;
  }
  const uint8_t* qs = block + 2;
  if (type == gguf::GgmlType::kQ4_1) {
    w.mins[2 * group] = block[2];
    w.mins[2 * group + 1] = block[3];
    qs = block + 4;
  }
  uint8_t* codes = &w.codes[row * (w.k / 2)];
  for (int j = 0; j < 16; ++j) {
    SetNibble(codes, 32 * b + j, qs[j]);
    SetNibble(codes, 32 * b + j + 16, qs[j] >> 4);
  }
}

// One ggml NVFP4 block {d[4], qs[32]} (64 elements; sub-block s: byte 8s + j holds element
// 16s + j low, 16s + j + 8 high). ggml reads d as UE4M3 (0x7F -> 0, then bit 7 ignored, so
// 0xFF -> 480), the planar layout as E4M3: the same value once 0x7F becomes 0x00 and bit 7 is
// cleared, except 0xFF (480 is no E4M3 value), which cannot be repacked exactly.
absl::Status RepackNvfp4Block(const uint8_t* block, int64_t row, int64_t b, PackedWeight& w) {
  const int64_t first_group = row * (w.k / 16) + 4 * b;
  uint8_t* codes = &w.codes[row * (w.k / 2)];
  for (int s = 0; s < 4; ++s) {
    if (block[s] == 0xFF) {
      return absl::InvalidArgumentError(absl::StrCat(
          "packed weight: NVFP4 row ", row, " block ", b, " has scale byte 0xFF (480)"));
    }
    w.scales[first_group + s] = block[s] == 0x7F ? 0 : block[s] & 0x7F;
    const uint8_t* qs = block + 4 + 8 * s;
    for (int j = 0; j < 8; ++j) {
      SetNibble(codes, 64 * b + 16 * s + j, qs[j]);
      SetNibble(codes, 64 * b + 16 * s + j + 8, qs[j] >> 4);
    }
  }
  return absl::OkStatus();
}

// One ggml MXFP4 block {e, qs[16]} (byte j holds element j low, j + 16 high). ggml's E8M0 gives
// 2^(e - 127) for every byte, 255 included (2^128); the planar E8M0 reads 255 as NaN, so a
// block with e = 255 cannot be repacked exactly.
absl::Status RepackMxfp4Block(const uint8_t* block, int64_t row, int64_t b, PackedWeight& w) {
  if (block[0] == 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packed weight: MXFP4 row ", row, " block ", b, " has scale byte 255 (2^128)"));
  }
  w.scales[row * (w.k / 32) + b] = block[0];
  uint8_t* codes = &w.codes[row * (w.k / 2)];
  for (int j = 0; j < 16; ++j) {
    SetNibble(codes, 32 * b + j, block[1 + j]);
    SetNibble(codes, 32 * b + j + 16, block[1 + j] >> 4);
  }
  return absl::OkStatus();
}

absl::Status RepackGgufBlock(gguf::GgmlType type, const uint8_t* block, int64_t row, int64_t b,
                             PackedWeight& w) {
  switch (w.scheme) {
    case PackedScheme::kQ4_K: RepackQ4KBlock(block, row, b, w); return absl::OkStatus();
    case PackedScheme::kNvfp4: return RepackNvfp4Block(block, row, b, w);
    case PackedScheme::kMxfp4: return RepackMxfp4Block(block, row, b, w);
    default: RepackLegacyBlock(type, block, row, b, w); return absl::OkStatus();
  }
}

}  // namespace

std::optional<PackedScheme> PackedSchemeOfGgufType(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ8_0: return PackedScheme::kQ8_0;
    case gguf::GgmlType::kQ4_0: return PackedScheme::kQ4_0;
    case gguf::GgmlType::kQ4_1: return PackedScheme::kQ4_1;
    case gguf::GgmlType::kQ4_K: return PackedScheme::kQ4_K;
    case gguf::GgmlType::kNvfp4: return PackedScheme::kNvfp4;
    case gguf::GgmlType::kMxfp4: return PackedScheme::kMxfp4;
    default: return std::nullopt;
  }
}

absl::StatusOr<PackedWeight> PackGgufRows(gguf::GgmlType type, std::span<const uint8_t> data,
                                          int n, int k) {
  const std::optional<PackedScheme> scheme = PackedSchemeOfGgufType(type);
  if (!scheme) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed weight: no packed form of GGUF ", gguf::GgmlTypeName(type)));
  }
  absl::StatusOr<PackedWeight> w = EmptyWeight(*scheme, n, k);
  if (!w.ok()) return w.status();
  const gguf::GgmlTypeInfo& info = gguf::GetGgmlTypeInfo(type);
  const int64_t blocks_per_row = k / info.block_size;
  if (absl::Status s = CheckSize("GGUF data", data.size(), n * blocks_per_row * info.type_size);
      !s.ok()) {
    return s;
  }
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const uint8_t* block = data.data() + (row * blocks_per_row + b) * info.type_size;
      if (absl::Status s = RepackGgufBlock(type, block, row, b, *w); !s.ok()) return s;
    }
  }
  return w;
}

absl::StatusOr<PackedWeight> PackPlanar(PackedScheme scheme, int n, int k,
                                        std::span<const uint8_t> codes,
                                        std::span<const uint8_t> scales,
                                        std::span<const uint8_t> mins,
                                        std::span<const uint16_t> super_scales,
                                        float tensor_scale) {
  absl::StatusOr<PackedWeight> w = EmptyWeight(scheme, n, k);
  if (!w.ok()) return w.status();
  for (auto [what, got, want] : {std::tuple{"codes", codes.size(), w->codes.size()},
                                 {"scales", scales.size(), w->scales.size()},
                                 {"mins", mins.size(), w->mins.size()},
                                 {"super_scales", super_scales.size_bytes(),
                                  w->super_scales.size() * 2}}) {
    if (absl::Status s = CheckSize(what, got, want); !s.ok()) return s;
  }
  w->codes.assign(codes.begin(), codes.end());
  w->scales.assign(scales.begin(), scales.end());
  w->mins.assign(mins.begin(), mins.end());
  w->super_scales.assign(super_scales.begin(), super_scales.end());
  w->tensor_scale = tensor_scale;
  return w;
}

namespace {

// Weight `e` of row `row` (packed_format.h's formulas; this file is built with
// -ffp-contract=off, so each operation rounds on its own).
float PackedElement(const PackedWeight& w, int64_t row, int64_t e) {
  const int64_t group = row * (w.k / PackedGroupSize(w.scheme)) + e / PackedGroupSize(w.scheme);
  const uint8_t* codes = &w.codes[row * PackedRowCodeBytes(w.scheme, w.k)];
  auto half = [](const std::vector<uint8_t>& bytes, int64_t i) {
    return util::HalfToFloat(LoadU16(&bytes[2 * i]));
  };
  const auto q = [&] { return static_cast<float>(GetNibble(codes, e)); };
  switch (w.scheme) {
    case PackedScheme::kQ8_0:
      return static_cast<float>(static_cast<int8_t>(codes[e])) * half(w.scales, group);
    case PackedScheme::kQ4_0:
      return (q() - 8.0f) * half(w.scales, group);
    case PackedScheme::kQ4_1:
      return q() * half(w.scales, group) + half(w.mins, group);
    case PackedScheme::kQ4_K: {
      const uint16_t* super = &w.super_scales[(row * (w.k / 256) + e / 256) * 2];
      const float d = util::HalfToFloat(super[0]) * static_cast<float>(w.scales[group]);
      const float m = util::HalfToFloat(super[1]) * static_cast<float>(w.mins[group]);
      return d * q() - m;
    }
    case PackedScheme::kNvfp4:
      return E2M1ToFloat(GetNibble(codes, e)) * E4M3ToFloat(w.scales[group]) * w.tensor_scale;
    case PackedScheme::kMxfp4:
      return E2M1ToFloat(GetNibble(codes, e)) * E8M0ToFloat(w.scales[group]);
  }
  return std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

std::vector<float> DequantizePacked(const PackedWeight& weight) {
  std::vector<float> out(int64_t{weight.n} * weight.k);
  for (int64_t row = 0; row < weight.n; ++row) {
    for (int64_t e = 0; e < weight.k; ++e) out[row * weight.k + e] = PackedElement(weight, row, e);
  }
  return out;
}

}  // namespace tessera::cuda
