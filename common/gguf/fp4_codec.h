// The scalar pieces of ggml's two 4-bit float formats, MXFP4 (type 39) and NVFP4 (type 40); see
// docs/design/fp4-formats.md for the block layouts and where each fact comes from.
//
// An element is an E2M1 code (sign bit 3, magnitude bits 0-2). ggml keeps the E2M1 values doubled
// as small integers (kE2M1Doubled) and halves the scale instead, so an element's value is
//   kE2M1Doubled[code] * scale_half
// with scale_half = E8M0ToFloatHalf(e) for MXFP4 and Ue4m3ToFloatHalf(d) for NVFP4 — the same
// float operations ggml's dequantize_row_mxfp4 / dequantize_row_nvfp4 perform. Both products are
// exact in f32 (at most 4 significant bits times at most 2) unless they overflow, so any code that
// computes them gives the same bits. Header-only: the CPU kernels inline these in their loops.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace tessera::gguf::fp4 {

// E2M1 values times two, indexed by the 4-bit code: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
// negatives (code 8 is -0, stored as 0 like ggml).
inline constexpr int8_t kE2M1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the value of an E8M0 scale byte, 2^(e - 128), as ggml's ggml_e8m0_to_fp32_half: bytes 0
// and 1 give the f32 subnormals 2^-128 and 2^-127; 255 (NaN in the OCP MX spec) is not special
// and gives 2^127.
inline float E8M0ToFloatHalf(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

namespace internal {

// 2^p for -10 <= p <= 8, by exact multiplications (constexpr: no ldexp).
constexpr float Pow2(int p) {
  float v = 1.0f;
  for (int i = 0; i < p; ++i) v *= 2.0f;
  for (int i = 0; i > p; --i) v *= 0.5f;
  return v;
}

// ggml_ue4m3_to_fp32 for every byte: bit 7 is ignored (exponent = bits 3-6, mantissa = bits 0-2,
// bias 7, subnormals mantissa * 2^-9); 0x00 and 0x7F (E4M3's NaN) give 0; the result is halved.
// 0xFF is not special: it decodes like exponent 15, mantissa 7 (240). Every step is exact.
constexpr std::array<float, 256> MakeUe4m3HalfTable() {
  std::array<float, 256> table{};
  for (int x = 0; x < 256; ++x) {
    if (x == 0x00 || x == 0x7F) continue;
    const int exponent = (x >> 3) & 0xF;
    const int mantissa = x & 0x7;
    const float raw = exponent == 0
                          ? static_cast<float>(mantissa) * Pow2(-9)
                          : (1.0f + static_cast<float>(mantissa) / 8.0f) * Pow2(exponent - 7);
    table[x] = raw * 0.5f;
  }
  return table;
}

inline constexpr std::array<float, 256> kUe4m3Half = MakeUe4m3HalfTable();

}  // namespace internal

// Half the value of an NVFP4 sub-block scale byte (UE4M3), as ggml's ggml_ue4m3_to_fp32.
constexpr float Ue4m3ToFloatHalf(uint8_t d) { return internal::kUe4m3Half[d]; }

// The nearest E4M3 byte (bias 7, 3 mantissa bits, subnormals, max 448) to x, ties to even;
// saturates at 448 (0x7E), so the NaN code 0x7F is never produced. 0 for x <= 0 and NaN.
uint8_t FloatToE4M3(float x);

// The nearest E2M1 code to v, ties to even (the code with mantissa bit 0 clear); |v| > 6
// saturates to 6. Values that round to zero, and NaN, give code 0 (+0).
uint8_t FloatToE2M1(float v);

}  // namespace tessera::gguf::fp4
