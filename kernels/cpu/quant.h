// ggml block layouts (Q8_0, Q4_0, Q4_1, MXFP4, NVFP4) and row (de)quantization.
//
// Dequantization is exact and identical on every ISA: d * q (an 11-bit f16 mantissa times a
// value of at most 8 bits) is exact in f32, so Q8_0 and Q4_0 values are exact and Q4_1's
// d * q + m is rounded once. MXFP4 and NVFP4 values are a doubled E2M1 value (at most 2
// significant bits) times a halved power-of-two or UE4M3 scale (at most 4), also exact
// (common/gguf/fp4_codec.h). This makes Matmul on quantized weights bit-identical to Matmul on
// the same weights dequantized to f32 at load (see matmul.h), and to ggml's dequantize_row_*.
// The quantizers follow ggml's reference (quantize_row_*_ref) and are for tests, benchmarks and
// tools; the server reads already-quantized GGUF tensors.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/weight_format.h"

namespace tessera::kernels::cpu {

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQuantBlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;  // f16 scale; value = d * (q - 8)
  uint8_t qs[kQuantBlockSize / 2];  // element j: low nibble of qs[j]; element j + 16: high nibble
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 offset; value = d * q + m
  uint8_t qs[kQuantBlockSize / 2];  // element j: low nibble of qs[j]; element j + 16: high nibble
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockMxfp4 {
  uint8_t e;  // E8M0 scale; value = kE2M1Doubled[q] * E8M0ToFloatHalf(e) (common/gguf/fp4_codec.h)
  uint8_t qs[kQuantBlockSize / 2];  // element j: low nibble of qs[j]; element j + 16: high nibble
};
static_assert(sizeof(BlockMxfp4) == 17);

inline constexpr int kNvfp4SubBlocks = 4;  // of 16 elements each

struct BlockNvfp4 {
  uint8_t d[kNvfp4SubBlocks];  // UE4M3 scale of sub-block s; value = kE2M1Doubled[q] * half(d[s])
  // Sub-block s is qs[8s .. 8s + 7]: byte j holds element 16s + j in its low nibble and element
  // 16s + j + 8 in its high nibble.
  uint8_t qs[kQuantBlockSize];
};
static_assert(sizeof(BlockNvfp4) == 36);

// out[k] <- one row of `format` at `row` (RowBytes(format, k) bytes, any alignment).
// Precondition: k % FormatBlockElements(format) == 0, out.size() >= k.
void DequantizeRow(WeightFormat format, const void* row, std::span<float> out);


}  // namespace tessera::kernels::cpu
