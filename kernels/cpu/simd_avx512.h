// 16-lane float vector for the kAvx512 kernel copies (one zmm register). Same interface and
// results as simd_avx2.h (FMA, same reduction tree). Include only from .cc files, inside
// nothing: this header opens its own target region.
#pragma once

#include "kernels/cpu/simd_scalar.h"
#include "kernels/cpu/simd_target.h"

#if TESSERA_X86_SIMD
#include "kernels/cpu/simd_intrinsics.h"

#include <cstdint>

TESSERA_BEGIN_TARGET_AVX512
namespace tessera::kernels::cpu::avx512 {

inline constexpr int kLanes = 16;

struct F32x16 {
  __m512 v;
};

// f16 bits -> float with F16C (exact; same value as util::HalfToFloat in common/util/half.h).
TESSERA_SIMD_INLINE float HalfBitsToFloat(uint16_t h) { return _cvtsh_ss(h); }

TESSERA_SIMD_INLINE F32x16 Set1(float a) { return {_mm512_set1_ps(a)}; }

// The two f16 values at p and p + 2, each converted (exactly) and broadcast to all lanes. Reads 4
// bytes. One memory broadcast and one conversion serve both (cheaper than two scalar loads).
TESSERA_SIMD_INLINE void BroadcastHalfPair(const uint8_t* p, F32x16* a, F32x16* b) {
  const __m256 pair = _mm256_broadcast_ss(reinterpret_cast<const float*>(p));
  const __m512 both = _mm512_cvtph_ps(_mm256_castps_si256(pair));  // a, b, a, b, ...
  a->v = _mm512_permute_ps(both, 0x00);
  b->v = _mm512_permute_ps(both, 0x55);
}
TESSERA_SIMD_INLINE F32x16 Zero() { return {_mm512_setzero_ps()}; }
TESSERA_SIMD_INLINE F32x16 Load(const float* p) { return {_mm512_loadu_ps(p)}; }
TESSERA_SIMD_INLINE __mmask16 FirstLanes(int n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}
TESSERA_SIMD_INLINE F32x16 LoadPartial(const float* p, int n) {
  return {_mm512_maskz_loadu_ps(FirstLanes(n), p)};
}
// 16 f16 values, converted exactly (f16 KV pools).
TESSERA_SIMD_INLINE F32x16 Load(const Float16* p) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
// Lanes [n, 16) are zero; reads only p[0, n).
TESSERA_SIMD_INLINE F32x16 LoadPartial(const Float16* p, int n) {
  Float16 lanes[16] = {};
  for (int i = 0; i < n; ++i) lanes[i] = p[i];
  return Load(lanes);
}
TESSERA_SIMD_INLINE F32x16 KeepFirst(F32x16 a, int n) {
  return {_mm512_maskz_mov_ps(FirstLanes(n), a.v)};
}
TESSERA_SIMD_INLINE void Store(float* p, F32x16 a) { _mm512_storeu_ps(p, a.v); }
TESSERA_SIMD_INLINE void StorePartial(float* p, F32x16 a, int n) {
  _mm512_mask_storeu_ps(p, FirstLanes(n), a.v);
}
TESSERA_SIMD_INLINE F32x16 Add(F32x16 a, F32x16 b) { return {_mm512_add_ps(a.v, b.v)}; }
TESSERA_SIMD_INLINE F32x16 Sub(F32x16 a, F32x16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
TESSERA_SIMD_INLINE F32x16 Mul(F32x16 a, F32x16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
TESSERA_SIMD_INLINE F32x16 Div(F32x16 a, F32x16 b) { return {_mm512_div_ps(a.v, b.v)}; }
TESSERA_SIMD_INLINE F32x16 Max(F32x16 a, F32x16 b) { return {_mm512_max_ps(a.v, b.v)}; }
// a * b + c, one rounding.
TESSERA_SIMD_INLINE F32x16 Fma(F32x16 a, F32x16 b, F32x16 c) {
  return {_mm512_fmadd_ps(a.v, b.v, c.v)};
}

// Upper 256 bits. The zero-masked shuffle avoids GCC 12's _mm512_undefined_* helpers, which
// trigger false -Wuninitialized warnings (GCC PR 105593).
TESSERA_SIMD_INLINE __m256 UpperHalf(__m512 a) {
  return _mm512_castps512_ps256(_mm512_maskz_shuffle_f32x4(0xFFFF, a, a, 0xEE));
}

TESSERA_SIMD_INLINE float ReduceAdd(F32x16 a) {
  const __m256 lo = _mm512_castps512_ps256(a.v);
  const __m256 hi = UpperHalf(a.v);
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55));
  return _mm_cvtss_f32(s1);
}
// Lane i of the result = ReduceAdd(v[i]), i < 16: the same additions (so the same bits), done on
// packed vectors. Each level adds the two halves of every vector's remaining sums and packs two
// vectors' results into one: 16 vectors of 16 -> 8 of 2 x 8 -> 4 of 4 x 4 -> 2 -> 1 holding all
// 16 sums, in about a third of the instructions of 16 ReduceAdd calls.
TESSERA_SIMD_INLINE F32x16 ReduceAdd16(const F32x16* v) {
  // Taking v in the order u[j] = v[4 * (j % 4) + j / 4] leaves the sums in lane order.
  auto u = [v](int j) { return v[4 * (j % 4) + j / 4].v; };
  __m512 s8[8];  // s8[j]: [l_i + l_{i+8}] of u[2j], then of u[2j + 1]
  for (int j = 0; j < 8; ++j) {
    const __m512 a = u(2 * j), b = u(2 * j + 1);
    s8[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  __m512 s4[4];  // s4[j], 128-bit lane t: [s_i + s_{i+4}] of u[4j + t]
  for (int j = 0; j < 4; ++j) {
    const __m512 a = s8[2 * j], b = s8[2 * j + 1];
    s4[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
  }
  __m512 s2[2];  // s2[j], lane t: [s_0 + s_2, s_1 + s_3] of u[8j + t], then of u[8j + 4 + t]
  for (int j = 0; j < 2; ++j) {
    const __m512 a = s4[2 * j], b = s4[2 * j + 1];
    s2[j] = _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
  }
  // Lane t: the totals of u[t], u[4 + t], u[8 + t], u[12 + t] = of v[4t], ..., v[4t + 3].
  return {_mm512_add_ps(_mm512_shuffle_ps(s2[0], s2[1], 0x88),
                        _mm512_shuffle_ps(s2[0], s2[1], 0xDD))};
}
TESSERA_SIMD_INLINE float ReduceMax(F32x16 a) {
  const __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(a.v), UpperHalf(a.v));
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const __m128 m1 = _mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 0x55));
  return _mm_cvtss_f32(m1);
}

TESSERA_SIMD_INLINE F32x16 LoadI8(const int8_t* p) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes))};
}
TESSERA_SIMD_INLINE void LoadNibbles(const uint8_t* p, F32x16* lo, F32x16* hi) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m512i wide = _mm512_cvtepu8_epi32(bytes);
  lo->v = _mm512_cvtepi32_ps(_mm512_and_si512(wide, _mm512_set1_epi32(0x0F)));
  hi->v = _mm512_cvtepi32_ps(_mm512_srli_epi32(wide, 4));
}
// lo[j] = d * (p[j] & 15) + m and hi[j] = d * (p[j] >> 4) + m for the 16 bytes at p, rounded
// once (d * q is exact). A nibble has 16 values, so the block's 16 possible results are computed
// with one FMA and each lane picks its own with a permute, which reads only the index's low 4
// bits: no masking, no int -> float conversion.
TESSERA_SIMD_INLINE void AffineNibbles(const uint8_t* p, F32x16 d, F32x16 m, F32x16* lo,
                                       F32x16* hi) {
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 table = _mm512_fmadd_ps(iota, d.v, m.v);
  const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  lo->v = _mm512_permutexvar_ps(bytes, table);
  hi->v = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
}

// The 16 E2M1 values (doubled, common/gguf/fp4_codec.h) times a halved scale: exact, the same
// products as the scalar copy; each lane then picks its code's value with a permute, which reads
// only the index's low 4 bits.
TESSERA_SIMD_INLINE __m512 Fp4Table(float scale_half) {
  const __m512 doubled = _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  return _mm512_mul_ps(doubled, _mm512_set1_ps(scale_half));
}
// One MXFP4 block's codes (16 bytes at qs) with E8M0 scale e: lo[j] = value of qs[j] & 15,
// hi[j] = value of qs[j] >> 4.
TESSERA_SIMD_INLINE void Mxfp4Chunk(const uint8_t* qs, uint8_t e, F32x16* lo, F32x16* hi) {
  const __m512 table = Fp4Table(gguf::fp4::E8M0ToFloatHalf(e));
  const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  lo->v = _mm512_permutexvar_ps(bytes, table);
  hi->v = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
}
// The permute table of every UE4M3 scale byte (16 KiB): the exact products
// kE2M1Doubled[i] * Ue4m3ToFloatHalf(d). Looking it up costs less than decoding the scale and
// scaling the 16 values for each 16-element sub-block.
struct alignas(64) Nvfp4Table {
  float values[16];
};
constexpr std::array<Nvfp4Table, 256> MakeNvfp4Tables() {
  std::array<Nvfp4Table, 256> tables{};
  for (int d = 0; d < 256; ++d) {
    for (int i = 0; i < 16; ++i) {
      tables[d].values[i] = static_cast<float>(gguf::fp4::kE2M1Doubled[i]) *
                            gguf::fp4::Ue4m3ToFloatHalf(static_cast<uint8_t>(d));
    }
  }
  return tables;
}
inline constexpr std::array<Nvfp4Table, 256> kNvfp4Tables = MakeNvfp4Tables();

// Two NVFP4 sub-blocks (8 code bytes each at qs, UE4M3 scales scales[0], scales[1]): lo = the
// first's values (low nibbles of its bytes, then high nibbles), hi = the second's.
TESSERA_SIMD_INLINE void Nvfp4Chunk(const uint8_t* qs, const uint8_t* scales, F32x16* lo,
                                    F32x16* hi) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m512i shift = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
  const __m512i first = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(bytes, bytes));  // qs[0..7] twice
  const __m512i second = _mm512_cvtepu8_epi32(_mm_unpackhi_epi64(bytes, bytes));
  lo->v = _mm512_permutexvar_ps(_mm512_srlv_epi32(first, shift),
                                _mm512_load_ps(kNvfp4Tables[scales[0]].values));
  hi->v = _mm512_permutexvar_ps(_mm512_srlv_epi32(second, shift),
                                _mm512_load_ps(kNvfp4Tables[scales[1]].values));
}

// Same algorithm and constants as scalar::ExpLane, with FMA.
TESSERA_SIMD_INLINE F32x16 Exp(F32x16 a) {
  using namespace ::tessera::kernels::cpu::scalar;  // constants
  const __m512 x = a.v;
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMin), _CMP_LT_OQ);
  const __mmask16 over = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMax), _CMP_GT_OQ);
  const __m512 xc =
      _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpMin)), _mm512_set1_ps(kExpMax));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kExpP0), r, _mm512_set1_ps(kExpP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP5));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  y = _mm512_mask_blend_ps(under, y, _mm512_setzero_ps());
  y = _mm512_mask_blend_ps(over, y, _mm512_set1_ps(__builtin_inff()));
  y = _mm512_mask_blend_ps(nan, y, x);
  return {y};
}

}  // namespace tessera::kernels::cpu::avx512
TESSERA_END_TARGET

#endif  // TESSERA_X86_SIMD
