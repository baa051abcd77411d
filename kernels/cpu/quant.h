// ggml block layouts (Q8_0, Q4_0, Q4_1) and row (de)quantization.
//
// Dequantization is exact and identical on every ISA: d * q (an 11-bit f16 mantissa times a
// value of at most 8 bits) is exact in f32, so Q8_0 and Q4_0 values are exact and Q4_1's
// d * q + m is rounded once. This makes Matmul on quantized weights bit-identical to Matmul on
// the same weights dequantized to f32 at load (see matmul.h).
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

// out[k] <- one row of `format` at `row` (RowBytes(format, k) bytes, any alignment).
// Precondition: k % FormatBlockElements(format) == 0, out.size() >= k.
void DequantizeRow(WeightFormat format, const void* row, std::span<float> out);


}  // namespace tessera::kernels::cpu
