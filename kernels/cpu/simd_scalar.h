// 16-lane float vector for the portable (kScalar) kernel copies: plain arrays that the compiler
// may auto-vectorize for the baseline ISA. Same interface as simd_avx2.h / simd_avx512.h.
// Differences from the SIMD copies: Fma is a separate multiply and add (two roundings), so
// results differ from kAvx2/kAvx512 in the last bits. ReduceAdd uses the same tree.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/gguf/fp4_codec.h"
#include "common/util/half.h"
#include "kernels/cpu/float16.h"
#include "kernels/cpu/simd_target.h"

namespace tessera::kernels::cpu::scalar {

inline constexpr int kLanes = 16;

struct F32x16 {
  float v[16];
};

TESSERA_SIMD_INLINE float HalfBitsToFloat(uint16_t h) { return util::HalfToFloat(h); }

TESSERA_SIMD_INLINE F32x16 Set1(float a);
// The two f16 values at p and p + 2, each converted (exactly) and broadcast. Reads 4 bytes.
TESSERA_SIMD_INLINE void BroadcastHalfPair(const uint8_t* p, F32x16* a, F32x16* b);

TESSERA_SIMD_INLINE F32x16 Set1(float a) {
  F32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = a;
  return r;
}
TESSERA_SIMD_INLINE F32x16 Zero() { return Set1(0.0f); }
TESSERA_SIMD_INLINE void BroadcastHalfPair(const uint8_t* p, F32x16* a, F32x16* b) {
  uint16_t h[2];
  std::memcpy(h, p, sizeof(h));
  *a = Set1(util::HalfToFloat(h[0]));
  *b = Set1(util::HalfToFloat(h[1]));
}
TESSERA_SIMD_INLINE F32x16 Load(const float* p) {
  F32x16 r;
  std::memcpy(r.v, p, sizeof(r.v));
  return r;
}
// Lanes [n, 16) are zero; reads only p[0, n). Precondition: 0 <= n <= 16.
TESSERA_SIMD_INLINE F32x16 LoadPartial(const float* p, int n) {
  F32x16 r = Zero();
  for (int i = 0; i < n; ++i) r.v[i] = p[i];
  return r;
}
// 16 f16 values, converted exactly (f16 KV pools).
TESSERA_SIMD_INLINE F32x16 Load(const Float16* p) {
  F32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = ToFloat(p[i]);
  return r;
}
TESSERA_SIMD_INLINE F32x16 LoadPartial(const Float16* p, int n) {
  F32x16 r = Zero();
  for (int i = 0; i < n; ++i) r.v[i] = ToFloat(p[i]);
  return r;
}
// Lanes [n, 16) set to zero. Precondition: 0 <= n <= 16.
TESSERA_SIMD_INLINE F32x16 KeepFirst(const F32x16& a, int n) {
  F32x16 r = a;
  for (int i = n; i < 16; ++i) r.v[i] = 0.0f;
  return r;
}
TESSERA_SIMD_INLINE void Store(float* p, const F32x16& a) { std::memcpy(p, a.v, sizeof(a.v)); }
TESSERA_SIMD_INLINE void StorePartial(float* p, const F32x16& a, int n) {
  for (int i = 0; i < n; ++i) p[i] = a.v[i];
}

#define TESSERA_SCALAR_BINARY(name, expr)                                 \
  TESSERA_SIMD_INLINE F32x16 name(const F32x16& a, const F32x16& b) {     \
    F32x16 r;                                                             \
    for (int i = 0; i < 16; ++i) r.v[i] = (expr);                         \
    return r;                                                             \
  }
TESSERA_SCALAR_BINARY(Add, a.v[i] + b.v[i])
TESSERA_SCALAR_BINARY(Sub, a.v[i] - b.v[i])
TESSERA_SCALAR_BINARY(Mul, a.v[i] * b.v[i])
TESSERA_SCALAR_BINARY(Div, a.v[i] / b.v[i])
TESSERA_SCALAR_BINARY(Max, a.v[i] > b.v[i] ? a.v[i] : b.v[i])
#undef TESSERA_SCALAR_BINARY

// a * b + c, rounded twice (no FMA on the baseline ISA).
TESSERA_SIMD_INLINE F32x16 Fma(const F32x16& a, const F32x16& b, const F32x16& c) {
  F32x16 r;
  for (int i = 0; i < 16; ++i) {
    const float p = a.v[i] * b.v[i];
    r.v[i] = p + c.v[i];
  }
  return r;
}

// ((l0+l8)+(l4+l12)) ... : the fixed tree every ISA uses.
TESSERA_SIMD_INLINE float ReduceAdd(const F32x16& a) {
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = a.v[i] + a.v[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  const float s2a = s4[0] + s4[2];
  const float s2b = s4[1] + s4[3];
  return s2a + s2b;
}
// Lane i of the result = ReduceAdd(v[i]), i < 16.
TESSERA_SIMD_INLINE F32x16 ReduceAdd16(const F32x16* v) {
  alignas(64) float sums[16];
  for (int i = 0; i < 16; ++i) sums[i] = ReduceAdd(v[i]);
  return Load(sums);
}
TESSERA_SIMD_INLINE float ReduceMax(const F32x16& a) {
  float m = a.v[0];
  for (int i = 1; i < 16; ++i) m = a.v[i] > m ? a.v[i] : m;
  return m;
}

// 16 int8 values -> float.
TESSERA_SIMD_INLINE F32x16 LoadI8(const int8_t* p) {
  F32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = static_cast<float>(p[i]);
  return r;
}
// 16 bytes -> their low nibbles (lo) and high nibbles (hi) as floats.
TESSERA_SIMD_INLINE void LoadNibbles(const uint8_t* p, F32x16* lo, F32x16* hi) {
  for (int i = 0; i < 16; ++i) {
    lo->v[i] = static_cast<float>(p[i] & 0x0F);
    hi->v[i] = static_cast<float>(p[i] >> 4);
  }
}
// lo[j] = d * (p[j] & 15) + m and hi[j] = d * (p[j] >> 4) + m for the 16 bytes at p, rounded
// once (d * q is exact).
TESSERA_SIMD_INLINE void AffineNibbles(const uint8_t* p, F32x16 d, F32x16 m, F32x16* lo,
                                       F32x16* hi) {
  LoadNibbles(p, lo, hi);
  *lo = Fma(*lo, d, m);
  *hi = Fma(*hi, d, m);
}

// E2M1 code -> its doubled value times the halved scale (exact; common/gguf/fp4_codec.h).
TESSERA_SIMD_INLINE float Fp4Lane(int code, float scale_half) {
  return static_cast<float>(gguf::fp4::kE2M1Doubled[code]) * scale_half;
}
// One MXFP4 block's codes (16 bytes at qs) with E8M0 scale e: lo[j] = value of qs[j] & 15,
// hi[j] = value of qs[j] >> 4.
TESSERA_SIMD_INLINE void Mxfp4Chunk(const uint8_t* qs, uint8_t e, F32x16* lo, F32x16* hi) {
  const float d = gguf::fp4::E8M0ToFloatHalf(e);
  for (int i = 0; i < 16; ++i) {
    lo->v[i] = Fp4Lane(qs[i] & 0x0F, d);
    hi->v[i] = Fp4Lane(qs[i] >> 4, d);
  }
}
// Two NVFP4 sub-blocks (8 code bytes each at qs, UE4M3 scales scales[0], scales[1]): lo = the
// first's values (low nibbles of its bytes, then high nibbles), hi = the second's.
TESSERA_SIMD_INLINE void Nvfp4Chunk(const uint8_t* qs, const uint8_t* scales, F32x16* lo,
                                    F32x16* hi) {
  const float d0 = gguf::fp4::Ue4m3ToFloatHalf(scales[0]);
  const float d1 = gguf::fp4::Ue4m3ToFloatHalf(scales[1]);
  for (int i = 0; i < 8; ++i) {
    lo->v[i] = Fp4Lane(qs[i] & 0x0F, d0);
    lo->v[i + 8] = Fp4Lane(qs[i] >> 4, d0);
    hi->v[i] = Fp4Lane(qs[8 + i] & 0x0F, d1);
    hi->v[i + 8] = Fp4Lane(qs[8 + i] >> 4, d1);
  }
}

// Shared constants of the exp approximation (Cephes expf: range reduction by ln 2 split in two
// parts, degree-5 polynomial). Max error about 2 ulp over the finite range.
inline constexpr float kExpMin = -87.33654f;  // below: 0 (true result < FLT_MIN)
inline constexpr float kExpMax = 88.0f;       // above: +inf (slightly early; harmless here)
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpP0 = 1.9875691500e-4f;
inline constexpr float kExpP1 = 1.3981999507e-3f;
inline constexpr float kExpP2 = 8.3334519073e-3f;
inline constexpr float kExpP3 = 4.1665795894e-2f;
inline constexpr float kExpP4 = 1.6666665459e-1f;
inline constexpr float kExpP5 = 5.0000001201e-1f;

inline float ExpLane(float x) {
  if (x != x) return x;
  if (x < kExpMin) return 0.0f;
  if (x > kExpMax) return std::numeric_limits<float>::infinity();
  const float n = std::nearbyint(x * kLog2e);
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kExpP0 * r + kExpP1;
  p = p * r + kExpP2;
  p = p * r + kExpP3;
  p = p * r + kExpP4;
  p = p * r + kExpP5;
  const float z = r * r;
  p = p * z + r;
  p = p + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

TESSERA_SIMD_INLINE F32x16 Exp(const F32x16& a) {
  F32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = ExpLane(a.v[i]);
  return r;
}

}  // namespace tessera::kernels::cpu::scalar
