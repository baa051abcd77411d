// 16-lane float vector for the kAvx2 kernel copies (two ymm registers: lanes 0-7 and 8-15).
// Same interface and results as simd_avx512.h (FMA, same reduction tree). Include only from
// .cc files; this header opens its own target region.
#pragma once

#include "kernels/cpu/simd_scalar.h"
#include "kernels/cpu/simd_target.h"

#if TESSERA_X86_SIMD
#include "kernels/cpu/simd_intrinsics.h"

#include <cstdint>

TESSERA_BEGIN_TARGET_AVX2
namespace tessera::kernels::cpu::avx2 {

inline constexpr int kLanes = 16;

struct F32x16 {
  __m256 lo;  // lanes 0-7
  __m256 hi;  // lanes 8-15
};

// f16 bits -> float with F16C (exact; same value as util::HalfToFloat in common/util/half.h).
TESSERA_SIMD_INLINE float HalfBitsToFloat(uint16_t h) { return _cvtsh_ss(h); }

TESSERA_SIMD_INLINE F32x16 Set1(float a) { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }

// The two f16 values at p and p + 2, each converted (exactly) and broadcast. Reads 4 bytes.
TESSERA_SIMD_INLINE void BroadcastHalfPair(const uint8_t* p, F32x16* a, F32x16* b) {
  const __m128 pair = _mm_broadcast_ss(reinterpret_cast<const float*>(p));
  const __m256 both = _mm256_cvtph_ps(_mm_castps_si128(pair));  // a, b, a, b, ...
  const __m256 first = _mm256_permute_ps(both, 0x00);
  const __m256 second = _mm256_permute_ps(both, 0x55);
  *a = {first, first};
  *b = {second, second};
}
TESSERA_SIMD_INLINE F32x16 Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
TESSERA_SIMD_INLINE F32x16 Load(const float* p) {
  return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
}
// Lane mask for lanes [base, base + 8) that are < n.
TESSERA_SIMD_INLINE __m256i LaneMask(int n, int base) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - base), iota);
}
TESSERA_SIMD_INLINE F32x16 LoadPartial(const float* p, int n) {
  return {_mm256_maskload_ps(p, LaneMask(n, 0)), _mm256_maskload_ps(p + 8, LaneMask(n, 8))};
}
// 16 f16 values, converted exactly with F16C (f16 KV pools).
TESSERA_SIMD_INLINE F32x16 Load(const Float16* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
}
// Lanes [n, 16) are zero; reads only p[0, n).
TESSERA_SIMD_INLINE F32x16 LoadPartial(const Float16* p, int n) {
  Float16 lanes[16] = {};
  for (int i = 0; i < n; ++i) lanes[i] = p[i];
  return Load(lanes);
}
TESSERA_SIMD_INLINE F32x16 KeepFirst(F32x16 a, int n) {
  return {_mm256_and_ps(a.lo, _mm256_castsi256_ps(LaneMask(n, 0))),
          _mm256_and_ps(a.hi, _mm256_castsi256_ps(LaneMask(n, 8)))};
}
TESSERA_SIMD_INLINE void Store(float* p, F32x16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
TESSERA_SIMD_INLINE void StorePartial(float* p, F32x16 a, int n) {
  _mm256_maskstore_ps(p, LaneMask(n, 0), a.lo);
  _mm256_maskstore_ps(p + 8, LaneMask(n, 8), a.hi);
}

#define TESSERA_AVX2_BINARY(name, op) \
  TESSERA_SIMD_INLINE F32x16 name(F32x16 a, F32x16 b) { return {op(a.lo, b.lo), op(a.hi, b.hi)}; }
TESSERA_AVX2_BINARY(Add, _mm256_add_ps)
TESSERA_AVX2_BINARY(Sub, _mm256_sub_ps)
TESSERA_AVX2_BINARY(Mul, _mm256_mul_ps)
TESSERA_AVX2_BINARY(Div, _mm256_div_ps)
TESSERA_AVX2_BINARY(Max, _mm256_max_ps)
#undef TESSERA_AVX2_BINARY

TESSERA_SIMD_INLINE F32x16 Fma(F32x16 a, F32x16 b, F32x16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}

TESSERA_SIMD_INLINE float ReduceAdd(F32x16 a) {
  const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55));
  return _mm_cvtss_f32(s1);
}
// Lane i of the result = ReduceAdd(v[i]), i < 16.
TESSERA_SIMD_INLINE F32x16 ReduceAdd16(const F32x16* v) {
  alignas(64) float sums[16];
  for (int i = 0; i < 16; ++i) sums[i] = ReduceAdd(v[i]);
  return Load(sums);
}
TESSERA_SIMD_INLINE float ReduceMax(F32x16 a) {
  const __m256 m8 = _mm256_max_ps(a.lo, a.hi);
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const __m128 m1 = _mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 0x55));
  return _mm_cvtss_f32(m1);
}

TESSERA_SIMD_INLINE F32x16 LoadI8(const int8_t* p) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8));
  return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)),
          _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))};
}
TESSERA_SIMD_INLINE void LoadNibbles(const uint8_t* p, F32x16* lo, F32x16* hi) {
  const __m256i mask = _mm256_set1_epi32(0x0F);
  const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i b =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
  lo->lo = _mm256_cvtepi32_ps(_mm256_and_si256(a, mask));
  lo->hi = _mm256_cvtepi32_ps(_mm256_and_si256(b, mask));
  hi->lo = _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4));
  hi->hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
}
// lo[j] = d * (p[j] & 15) + m and hi[j] = d * (p[j] >> 4) + m for the 16 bytes at p, rounded
// once (d * q is exact).
TESSERA_SIMD_INLINE void AffineNibbles(const uint8_t* p, F32x16 d, F32x16 m, F32x16* lo,
                                       F32x16* hi) {
  LoadNibbles(p, lo, hi);
  *lo = Fma(*lo, d, m);
  *hi = Fma(*hi, d, m);
}

// FP4 values: 8 E2M1 codes, one per 32-bit lane (bits 0-3; higher bits are ignored), are decoded
// with one vpermps over a table of the 8 scaled magnitudes (it reads bits 0-2) and an XOR that
// moves bit 3, the sign, to bit 31. The table entries carry i << 28 XORed in, which cancels the
// magnitude bits the shift also brings to bits 28-30. Code 8 (E2M1 -0, ggml's 0) decodes to -0
// here, +0 elsewhere: as an FMA multiplicand it adds nothing either way, because a matmul
// accumulator starts at +0 and, rounding to nearest, only -0 + -0 is -0, so it is never -0 (and
// inf * 0 is the same default NaN for both signs); the outputs keep the same bits.

// Table bits for magnitudes `m` (codes 0-7, scaled): m[i] ^ i << 28.
TESSERA_SIMD_INLINE __m256 Fp4SignTable(__m256 magnitudes) {
  const __m256i shifts = _mm256_setr_epi32(0, 1 << 28, 2 << 28, 3 << 28, 4 << 28, 5 << 28,
                                           6 << 28, 7 << 28);
  return _mm256_xor_ps(magnitudes, _mm256_castsi256_ps(shifts));
}
TESSERA_SIMD_INLINE __m256 Fp4Lanes(__m256i codes, __m256 table) {
  const __m256 value = _mm256_permutevar8x32_ps(table, codes);
  return _mm256_xor_ps(value, _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28)));
}
// The bytes p[0..7] and p[8..15], one per 32-bit lane.
TESSERA_SIMD_INLINE void LoadBytes8x2(const uint8_t* p, __m256i* first, __m256i* second) {
  *first = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  *second = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
}

// The vpermps table of every UE4M3 scale byte (8 KiB): looking it up costs less than decoding
// the scale and scaling the magnitudes for each 16-element sub-block. Entries are the exact
// products kE2M1Doubled[i] * Ue4m3ToFloatHalf(d), as bits, with i << 28 XORed in.
struct alignas(32) Nvfp4SignTable {
  uint32_t bits[8];
};
constexpr std::array<Nvfp4SignTable, 256> MakeNvfp4SignTables() {
  std::array<Nvfp4SignTable, 256> tables{};
  for (int d = 0; d < 256; ++d) {
    for (uint32_t i = 0; i < 8; ++i) {
      const float value = static_cast<float>(gguf::fp4::kE2M1Doubled[i]) *
                          gguf::fp4::Ue4m3ToFloatHalf(static_cast<uint8_t>(d));
      tables[d].bits[i] = std::bit_cast<uint32_t>(value) ^ (i << 28);
    }
  }
  return tables;
}
inline constexpr std::array<Nvfp4SignTable, 256> kNvfp4SignTables = MakeNvfp4SignTables();

// One MXFP4 block's codes (16 bytes at qs) with E8M0 scale e: lo[j] = value of qs[j] & 15,
// hi[j] = value of qs[j] >> 4.
TESSERA_SIMD_INLINE void Mxfp4Chunk(const uint8_t* qs, uint8_t e, F32x16* lo, F32x16* hi) {
  const __m256 magnitudes = _mm256_mul_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 6, 8, 12),
                                          _mm256_set1_ps(gguf::fp4::E8M0ToFloatHalf(e)));
  const __m256 table = Fp4SignTable(magnitudes);
  __m256i a, b;
  LoadBytes8x2(qs, &a, &b);
  lo->lo = Fp4Lanes(a, table);
  lo->hi = Fp4Lanes(b, table);
  hi->lo = Fp4Lanes(_mm256_srli_epi32(a, 4), table);
  hi->hi = Fp4Lanes(_mm256_srli_epi32(b, 4), table);
}
// Two NVFP4 sub-blocks (8 code bytes each at qs, UE4M3 scales scales[0], scales[1]): lo = the
// first's values (low nibbles of its bytes, then high nibbles), hi = the second's.
TESSERA_SIMD_INLINE void Nvfp4Chunk(const uint8_t* qs, const uint8_t* scales, F32x16* lo,
                                    F32x16* hi) {
  const __m256 first = _mm256_load_ps(
      reinterpret_cast<const float*>(kNvfp4SignTables[scales[0]].bits));
  const __m256 second = _mm256_load_ps(
      reinterpret_cast<const float*>(kNvfp4SignTables[scales[1]].bits));
  __m256i a, b;
  LoadBytes8x2(qs, &a, &b);
  lo->lo = Fp4Lanes(a, first);
  lo->hi = Fp4Lanes(_mm256_srli_epi32(a, 4), first);
  hi->lo = Fp4Lanes(b, second);
  hi->hi = Fp4Lanes(_mm256_srli_epi32(b, 4), second);
}

// Same algorithm and constants as scalar::ExpLane, with FMA (bit-identical to avx512::Exp).
TESSERA_SIMD_INLINE __m256 Exp8(__m256 x) {
  using namespace ::tessera::kernels::cpu::scalar;  // constants
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMin), _CMP_LT_OQ);
  const __m256 over = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMax), _CMP_GT_OQ);
  const __m256 xc =
      _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpMin)), _mm256_set1_ps(kExpMax));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kExpP0), r, _mm256_set1_ps(kExpP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP5));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), over);
  y = _mm256_blendv_ps(y, x, nan);
  return y;
}
TESSERA_SIMD_INLINE F32x16 Exp(F32x16 a) { return {Exp8(a.lo), Exp8(a.hi)}; }

}  // namespace tessera::kernels::cpu::avx2
TESSERA_END_TARGET

#endif  // TESSERA_X86_SIMD
