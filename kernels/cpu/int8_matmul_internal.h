// Internals of int8_matmul.cc shared with its AVX2 and VNNI copies (int8_matmul_avx2.cc,
// int8_matmul_vnni.cc). Not a public API.
//
// Packed layout: groups of kInt8GroupRows output rows, group-major; within a group, one record
// per 32-element block, in k order:
//   d[16] (f16, lane c = row c of the group), then for Q4_1 m[16] (f16), then the codes in
//   64-byte chunks, lane c owning bytes [4c, 4c + 4) of each chunk:
//     Q8_0: 8 chunks; chunk t byte s of lane c = u[c][4t + s]
//     Q4_*: 4 chunks; chunk t byte s of lane c = u[c][8t + s] | u[c][8t + 4 + s] << 4
// so the codes of elements [4i, 4i + 4) of all 16 rows form one 64-byte vector (for Q4, after
// taking the low or high nibbles).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/util/check.h"
#include "kernels/cpu/int8_matmul.h"
#include "kernels/cpu/weight_format.h"

namespace tessera::kernels::cpu::int8_internal {

inline constexpr int kChunkBytes = 64;
inline constexpr int kMaxTileRows = 8;  // activation rows per kernel call

struct Int8Layout {
  int code_offset = 0;  // o in int8_matmul.h
  bool has_min = false;
  int code_chunks = 0;

  constexpr int ScaleBytes() const { return (has_min ? 2 : 1) * 2 * kInt8GroupRows; }
  constexpr int GroupBlockBytes() const { return ScaleBytes() + code_chunks * kChunkBytes; }
};

// The packed record of each format; constexpr so that the SIMD copies specialize on it.
constexpr Int8Layout LayoutOf(WeightFormat format) {
  switch (format) {
    case WeightFormat::kQ4_1:
      return {.code_offset = 0, .has_min = true, .code_chunks = 4};
    case WeightFormat::kQ4_0:
      return {.code_offset = 8, .has_min = false, .code_chunks = 4};
    case WeightFormat::kQ8_0:
      return {.code_offset = 128, .has_min = false, .code_chunks = 8};
    default:
      TESSERA_CHECK(false, "Int8 matmul: unsupported weight format");
      return {};
  }
}

inline int PackedCode(const Int8Layout& layout, const uint8_t* codes, int c, int j) {
  if (layout.code_chunks == 8) return codes[(j / 4) * kChunkBytes + 4 * c + j % 4];
  const int within = j % 8;
  const uint8_t byte = codes[(j / 8) * kChunkBytes + 4 * c + within % 4];
  return within < 4 ? byte & 0x0F : byte >> 4;
}

inline void StorePackedCode(const Int8Layout& layout, uint8_t* codes, int c, int j, int code) {
  if (layout.code_chunks == 8) {
    codes[(j / 4) * kChunkBytes + 4 * c + j % 4] = static_cast<uint8_t>(code);
    return;
  }
  const int within = j % 8;
  uint8_t& byte = codes[(j / 8) * kChunkBytes + 4 * c + within % 4];
  byte = static_cast<uint8_t>(byte | (within < 4 ? code : code << 4));
}

inline uint16_t LoadHalf(const uint8_t* p, int c) {
  uint16_t h;
  std::memcpy(&h, p + 2 * c, sizeof(h));
  return h;
}

// Activations quantized per int8_matmul.h step 1: row r's codes at q + r * k, its per-block
// scales, code sums and dx * float(xsum) at dx / xsum / sx + r * blocks.
struct QuantizedRows {
  int8_t* q;
  float* dx;
  int32_t* xsum;
  float* sx;
  int64_t k;
  int64_t blocks;
};

// Row r of x [k] -> its codes, dx, xsum and sx in `rows`.
void QuantizeRowPortable(const float* x, int64_t r, const QuantizedRows& rows);
void QuantizeRowAvx2(const float* x, int64_t r, const QuantizedRows& rows);
void QuantizeRowVnni(const float* x, int64_t r, const QuantizedRows& rows);

// y[r, c] for activation rows [row0, row0 + rows) (rows <= kMaxTileRows) and the first
// valid_cols rows of one packed group of `blocks` blocks; y row stride ldy.
void GroupTilePortable(WeightFormat format, const uint8_t* group, int64_t blocks,
                       const QuantizedRows& x, int64_t row0, int rows, float* y, int64_t ldy,
                       int valid_cols);
void GroupTileAvx2(WeightFormat format, const uint8_t* group, int64_t blocks,
                   const QuantizedRows& x, int64_t row0, int rows, float* y, int64_t ldy,
                   int valid_cols);
void GroupTileVnni(WeightFormat format, const uint8_t* group, int64_t blocks,
                   const QuantizedRows& x, int64_t row0, int rows, float* y, int64_t ldy,
                   int valid_cols);

// One copy of the kernels (portable, AVX2 or VNNI); all give the same bits.
struct Int8Kernels {
  void (*quantize_row)(const float* x, int64_t r, const QuantizedRows& rows);
  void (*group_tile)(WeightFormat format, const uint8_t* group, int64_t blocks,
                     const QuantizedRows& x, int64_t row0, int rows, float* y, int64_t ldy,
                     int valid_cols);
};

// Calls fn(format_constant, rows_constant) with the weight format (kQ8_0, kQ4_0, else kQ4_1) and
// the tile rows (1..kMaxTileRows) as std::integral_constant values, so that a SIMD copy
// instantiates one kernel per (format, rows) from one generic lambda.
template <typename Fn>
void WithTileShape(WeightFormat format, int rows, Fn&& fn) {
  auto with_rows = [&](auto f) {
    switch (rows) {
      case 1: return fn(f, std::integral_constant<int, 1>{});
      case 2: return fn(f, std::integral_constant<int, 2>{});
      case 3: return fn(f, std::integral_constant<int, 3>{});
      case 4: return fn(f, std::integral_constant<int, 4>{});
      case 5: return fn(f, std::integral_constant<int, 5>{});
      case 6: return fn(f, std::integral_constant<int, 6>{});
      case 7: return fn(f, std::integral_constant<int, 7>{});
      default: return fn(f, std::integral_constant<int, kMaxTileRows>{});
    }
  };
  switch (format) {
    case WeightFormat::kQ8_0:
      return with_rows(std::integral_constant<WeightFormat, WeightFormat::kQ8_0>{});
    case WeightFormat::kQ4_0:
      return with_rows(std::integral_constant<WeightFormat, WeightFormat::kQ4_0>{});
    default:
      return with_rows(std::integral_constant<WeightFormat, WeightFormat::kQ4_1>{});
  }
}

}  // namespace tessera::kernels::cpu::int8_internal
