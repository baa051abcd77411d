// Decoding packed weights (packed_format.h) on the device, shared by the packed-linear kernels:
// each weight is written w = scale·c + min with c a small integer code value and (scale, min)
// its group's, so a kernel sums Σ x·c per group and applies the group's scale (and min·Σ x)
// once, in f32:
//   Q8_0  c = q (int8)          scale = d                min = 0
//   Q4_0  c = q − 8             scale = d                min = 0
//   Q4_1  c = q                 scale = d                min = m
//   Q4_K  c = q                 scale = d·sc             min = −(dmin·mn)
//   NVFP4 c = 2·e2m1(q)         scale = e4m3(s) / 2      min = 0   (tensor_scale: at the output)
//   MXFP4 c = 2·e2m1(q)         scale = 2^(e − 127) / 2  min = 0
// Every c is an integer of at most 8 bits (|c| <= 128), exact in f32, bf16 and f16, and every
// scale is exact (halving a finite E4M3 or E8M0 value stays in f32's range), so scale·c + min
// is the reference weight up to the one rounding of Q4_1's and Q4_K's addition.
// Code values are made without an int->float instruction (a quarter-rate pipe on the GPU): the
// integer u < 2^23 is placed in the mantissa of 2^23 and 2^23 (+ the offset) subtracted, exact.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/packed_format.h"
#include "kernels/cuda/vector_access.cuh"

namespace tessera::cuda::packed_detail {

inline constexpr float kTwoTo23 = 8388608.0f;

// 2^23 + u, for 0 <= u < 2^23.
__device__ __forceinline__ float Magic(unsigned u) { return __uint_as_float(0x4B000000u | u); }

// c for one code: `code` is the nibble (4-bit schemes) or the byte (Q8_0).
template <PackedScheme kScheme>
__device__ __forceinline__ float CodeValue(unsigned code) {
  if constexpr (kScheme == PackedScheme::kQ8_0) {
    return Magic(code ^ 0x80u) - (kTwoTo23 + 128.0f);  // q + 128, as unsigned
  } else if constexpr (kScheme == PackedScheme::kQ4_0) {
    return Magic(code) - (kTwoTo23 + 8.0f);
  } else if constexpr (kScheme == PackedScheme::kQ4_1 || kScheme == PackedScheme::kQ4_K) {
    return Magic(code) - kTwoTo23;
  } else {
    // 2·|e2m1| for magnitude codes 0..7 is {0, 1, 2, 3, 4, 6, 8, 12}: the nibbles of 0xC8643210.
    const float magnitude = Magic((0xC8643210u >> (4 * (code & 7u))) & 15u) - kTwoTo23;
    return __uint_as_float(__float_as_uint(magnitude) | ((code & 8u) << 28));
  }
}

// Code `i` (0-based, in element order) of a 32-bit word of codes.
template <PackedScheme kScheme>
__device__ __forceinline__ unsigned CodeOfWord(unsigned word, int i) {
  if constexpr (PackedCodeBits(kScheme) == 8) return (word >> (8 * i)) & 0xFFu;
  return (word >> (4 * i)) & 0xFu;
}

__device__ __forceinline__ float HalfBitsToFloat(unsigned bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// E4M3 -> f16 is exact (every E4M3 value, subnormals and NaN included, is an f16), and one
// instruction from sm_89 on (cvt.rn.f16x2.e4m3x2; CUDA's own software conversion elsewhere).
__device__ __forceinline__ float E4M3ToFloat(unsigned bits) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(bits),
                                                     __NV_E4M3)));
}

// Two E4M3 values (the low two bytes of `bits`, low byte first) as f32.
__device__ __forceinline__ float2 E4M3PairToFloat2(unsigned bits) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(
      static_cast<__nv_fp8x2_storage_t>(bits & 0xFFFFu), __NV_E4M3)));
}

__device__ __forceinline__ float E8M0ToFloat(unsigned bits) {
  if (bits == 255) return __uint_as_float(0x7FC00000u);
  return __uint_as_float(bits != 0 ? bits << 23 : 0x00400000u);  // 2^-127 is subnormal
}

struct GroupScale {
  float scale;
  float min;  // 0 for schemes without mins
};

// A group's scale fields as stored (f16 bits, bytes, Q4_K's {d, dmin} word). Kernels load them
// a step ahead of their use and decode them when used, so the load latency hides behind work.
struct RawGroupScale {
  unsigned scale = 0;
  unsigned min = 0;
  unsigned super = 0;
};

// Group `group` of row `row` (packed_format.h's arrays, through the read-only path).
template <PackedScheme kScheme>
__device__ __forceinline__ RawGroupScale LoadRawGroupScale(const PackedLinear& w, int row,
                                                           int group) {
  const int64_t index = int64_t{row} * (w.k / PackedGroupSize(kScheme)) + group;
  RawGroupScale raw;
  if constexpr (PackedScaleBytes(kScheme) == 2) {
    raw.scale = __ldg(reinterpret_cast<const unsigned short*>(w.scales) + index);
  } else {
    raw.scale = __ldg(w.scales + index);
  }
  if constexpr (kScheme == PackedScheme::kQ4_1) {
    raw.min = __ldg(reinterpret_cast<const unsigned short*>(w.mins) + index);
  } else if constexpr (kScheme == PackedScheme::kQ4_K) {
    raw.min = __ldg(w.mins + index);
    raw.super = __ldg(reinterpret_cast<const unsigned*>(w.super_scales) +
                      int64_t{row} * (w.k / kPackedSuperGroup) + group / 8);
  }
  return raw;
}

template <PackedScheme kScheme>
__device__ __forceinline__ GroupScale DecodeGroupScale(const RawGroupScale& raw) {
  if constexpr (kScheme == PackedScheme::kQ8_0 || kScheme == PackedScheme::kQ4_0) {
    return {HalfBitsToFloat(raw.scale), 0.0f};
  } else if constexpr (kScheme == PackedScheme::kQ4_1) {
    return {HalfBitsToFloat(raw.scale), HalfBitsToFloat(raw.min)};
  } else if constexpr (kScheme == PackedScheme::kQ4_K) {
    const float d = __fmul_rn(HalfBitsToFloat(raw.super & 0xFFFFu), static_cast<float>(raw.scale));
    const float m = __fmul_rn(HalfBitsToFloat(raw.super >> 16), static_cast<float>(raw.min));
    return {d, -m};
  } else if constexpr (kScheme == PackedScheme::kNvfp4) {
    return {__fmul_rn(E4M3ToFloat(raw.scale), 0.5f), 0.0f};
  } else {
    return {__fmul_rn(E8M0ToFloat(raw.scale), 0.5f), 0.0f};
  }
}

// Weight (row, col) as packed_format.h's f32 formula (without NVFP4's tensor scale): scale·c,
// or scale·c + min with one rounding; what PackedDequantizeKernel writes before rounding to T.
// One element at a time: for kernels that stage weight tiles element by element.
template <PackedScheme kScheme>
__device__ __forceinline__ float PackedWeightValue(const PackedLinear& w, int row, int col) {
  constexpr int kCodesPerWord = 32 / PackedCodeBits(kScheme);
  const auto* words = reinterpret_cast<const unsigned*>(w.codes + int64_t{row} *
                                                                      PackedRowCodeBytes(kScheme, w.k));
  const unsigned code = CodeOfWord<kScheme>(__ldg(words + col / kCodesPerWord), col % kCodesPerWord);
  const GroupScale scale =
      DecodeGroupScale<kScheme>(LoadRawGroupScale<kScheme>(w, row, col / PackedGroupSize(kScheme)));
  const float c = CodeValue<kScheme>(code);
  return PackedHasMins(kScheme) ? __fmaf_rn(scale.scale, c, scale.min) : __fmul_rn(scale.scale, c);
}

// Two floats as T (bf16 or f16) packed in a word, `low` in the low half (an mma operand pair).
template <typename T>
__device__ __forceinline__ uint32_t PackPair(float low, float high) {
  return Bits16(FromFloat<T>(low)) | (Bits16(FromFloat<T>(high)) << 16);
}

}  // namespace tessera::cuda::packed_detail
