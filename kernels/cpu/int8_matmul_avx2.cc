// AVX2 copy of the int8 matmul kernels (int8_matmul_internal.h); same bits as the portable copy
// in int8_matmul.cc.
//
// A packed group is worked as two halves of 8 output rows (one 256-bit vector each). The integer
// dot products use vpmaddubsw (unsigned code x signed activation, pairs summed into int16) and
// vpmaddwd against ones (int16 pairs into int32):
//  - Q4_*: codes <= 15 and |q| <= 127, so one vpmaddubsw lane is at most 2 * 15 * 127 = 3810 and
//    the 8 of a block sum to at most 30480: the whole block is summed in int16, exactly.
//  - Q8_0: the codes are taken back to signed q = u - 128 and multiplied as |q| * (sign(q) * x)
//    (at most 2 * 128 * 127 = 32512 per lane), which is Σ u x − 128 · xsum exactly.
#include <cstdint>
#include <cstring>

#include "common/util/check.h"
#include "kernels/cpu/int8_matmul_internal.h"
#include "kernels/cpu/simd_target.h"

#if TESSERA_X86_SIMD
#include "kernels/cpu/simd_intrinsics.h"

TESSERA_BEGIN_TARGET_AVX2
namespace tessera::kernels::cpu::int8_internal {
namespace {

constexpr int kHalfRows = 8;
// Software prefetch distance along the packed weights (groups are contiguous, so this runs on
// into the next group). Zen 3, BM_Int8ModelMatmuls m = 8, 2 threads: 13.5–17.4 ms without,
// 10.7–12.8 ms at 4 KiB (1 and 2 KiB in between); engine batched decode +25%
// (docs/perf/cpu.md).
constexpr int kPrefetchAhead = 4096;

TESSERA_SIMD_INLINE __m256i BroadcastDword(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

TESSERA_SIMD_INLINE float MaxOfLanes(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float m = lanes[0];
  for (int i = 1; i < 8; ++i) m = lanes[i] > m ? lanes[i] : m;
  return m;
}

TESSERA_SIMD_INLINE int32_t SumOfLanes(__m256i v) {
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  int32_t s = 0;
  for (int i = 0; i < 8; ++i) s += lanes[i];
  return s;
}

// The codes of one half (8 rows) of a record, unpacked once and multiplied with the activation
// blocks of several rows. BlockSum(xq) = Σ_j u_j q_j − o · xsum per row (one lane each), for
// Q4_0 without its − 8 · xsum (the caller subtracts it).
template <WeightFormat F>
struct CodeVectors {
  // Q4: w[2t] = elements [8t, 8t + 4) of each row (low nibbles of chunk t), w[2t + 1] =
  // elements [8t + 4, 8t + 8) (high nibbles). Q8_0: w[t] = |q| of elements [4t, 4t + 4),
  // sign[t] = q (q = u - 128).
  __m256i w[8];
  __m256i sign[F == WeightFormat::kQ8_0 ? 8 : 1];

  TESSERA_SIMD_INLINE explicit CodeVectors(const uint8_t* codes) {
    if constexpr (F == WeightFormat::kQ8_0) {
      const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
      for (int t = 0; t < 8; ++t) {
        sign[t] = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + t * kChunkBytes)), bias);
        w[t] = _mm256_abs_epi8(sign[t]);
      }
    } else {
      const __m256i low = _mm256_set1_epi8(0x0F);
      for (int t = 0; t < 4; ++t) {
        const __m256i v =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + t * kChunkBytes));
        w[2 * t] = _mm256_and_si256(v, low);
        w[2 * t + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
      }
    }
  }

  TESSERA_SIMD_INLINE __m256i BlockSum(const int8_t* xq) const {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i m[8];
    if constexpr (F == WeightFormat::kQ8_0) {
      // |q| * (sign(q) * x): at most 2 * 128 * 127 per int16 lane; widened before summing.
      for (int i = 0; i < 8; ++i) {
        m[i] = _mm256_madd_epi16(
            _mm256_maddubs_epi16(w[i], _mm256_sign_epi8(BroadcastDword(xq + 4 * i), sign[i])),
            ones);
      }
      return _mm256_add_epi32(
          _mm256_add_epi32(_mm256_add_epi32(m[0], m[1]), _mm256_add_epi32(m[2], m[3])),
          _mm256_add_epi32(_mm256_add_epi32(m[4], m[5]), _mm256_add_epi32(m[6], m[7])));
    } else {
      for (int i = 0; i < 8; ++i) m[i] = _mm256_maddubs_epi16(w[i], BroadcastDword(xq + 4 * i));
      const __m256i s = _mm256_add_epi16(
          _mm256_add_epi16(_mm256_add_epi16(m[0], m[1]), _mm256_add_epi16(m[2], m[3])),
          _mm256_add_epi16(_mm256_add_epi16(m[4], m[5]), _mm256_add_epi16(m[6], m[7])));
      return _mm256_madd_epi16(s, ones);
    }
  }
};

// Rows [row0, row0 + R) of x times the 16 rows of a group, in one sweep over its records (the
// group streams from memory once, in order); valid_cols of the 16 (1..16) are stored.
template <WeightFormat F, int R>
void GroupTile(const uint8_t* group, int64_t blocks, const QuantizedRows& x, int64_t row0,
               float* y, int64_t ldy, int valid_cols) {
  constexpr Int8Layout kLayout = LayoutOf(F);
  constexpr bool kHasMin = kLayout.has_min;
  constexpr int kScaleBytes = kLayout.ScaleBytes();
  constexpr int kRecordBytes = kLayout.GroupBlockBytes();
  const int halves = valid_cols > kHalfRows ? 2 : 1;
  __m256 acc[2][R];
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  }
  const bool first_tile = row0 == 0;  // later row tiles of the group find it in cache
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = group + b * kRecordBytes;
    for (int line = 0; first_tile && line < kRecordBytes; line += 64) {
      __builtin_prefetch(p + kPrefetchAhead + line);  // a hint: never faults past the end
    }
    const int8_t* xq[R];
    for (int r = 0; r < R; ++r) xq[r] = x.q + (row0 + r) * x.k + b * kQuantBlockSize;
    for (int h = 0; h < halves; ++h) {
      const uint8_t* codes = p + kScaleBytes + h * (kChunkBytes / 2);
      const __m256 d = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * kHalfRows * h)));
      __m256 mw = _mm256_setzero_ps();
      if constexpr (kHasMin) {
        mw = _mm256_cvtph_ps(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(p + 2 * kInt8GroupRows + 2 * kHalfRows * h)));
      }
      CodeVectors<F> w(codes);
      for (int r = 0; r < R; ++r) {
        const int64_t s = (row0 + r) * x.blocks + b;
        __m256i isum = w.BlockSum(xq[r]);
        if constexpr (F == WeightFormat::kQ4_0) {
          isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * x.xsum[s]));
        }
        acc[h][r] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x.dx[s])),
                                    _mm256_cvtepi32_ps(isum), acc[h][r]);
        if constexpr (kHasMin) acc[h][r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x.sx[s]), acc[h][r]);
      }
    }
  }
  alignas(32) float lanes[kInt8GroupRows];
  for (int r = 0; r < R; ++r) {
    if (valid_cols == kInt8GroupRows) {
      _mm256_storeu_ps(y + r * ldy, acc[0][r]);
      _mm256_storeu_ps(y + r * ldy + kHalfRows, acc[1][r]);
      continue;
    }
    _mm256_store_ps(lanes, acc[0][r]);
    _mm256_store_ps(lanes + kHalfRows, acc[1][r]);
    std::memcpy(y + r * ldy, lanes, valid_cols * sizeof(float));
  }
}

}  // namespace

void QuantizeRowAvx2(const float* x, int64_t r, const QuantizedRows& rows) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < rows.blocks; ++b) {
    const float* xb = x + b * kQuantBlockSize;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, v[i]));
    }
    const float m = MaxOfLanes(amax);
    const __m256 inverse = _mm256_set1_ps(m > 0.0f ? 127.0f / m : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inverse));
    // |q| <= 127: the saturating packs are exact; they interleave 128-bit lanes, undone below.
    const __m256i q16 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8 = _mm256_packs_epi16(q16, q16b);
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows.q + r * rows.k + b * kQuantBlockSize),
                        ordered);
    const int64_t s = r * rows.blocks + b;
    rows.dx[s] = m / 127.0f;
    rows.xsum[s] =
        SumOfLanes(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    rows.sx[s] = rows.dx[s] * static_cast<float>(rows.xsum[s]);
  }
}

void GroupTileAvx2(WeightFormat format, const uint8_t* group, int64_t blocks,
                   const QuantizedRows& x, int64_t row0, int rows, float* y, int64_t ldy,
                   int valid_cols) {
  WithTileShape(format, rows, [&](auto f, auto r) {
    GroupTile<decltype(f)::value, decltype(r)::value>(group, blocks, x, row0, y, ldy, valid_cols);
  });
}

}  // namespace tessera::kernels::cpu::int8_internal
TESSERA_END_TARGET

#else  // no x86 SIMD: the AVX2 ISA is never supported, so these are never called.

namespace tessera::kernels::cpu::int8_internal {
void QuantizeRowAvx2(const float*, int64_t, const QuantizedRows&) {
  TESSERA_CHECK(false, "QuantizeRowAvx2: built without x86 SIMD");
}
void GroupTileAvx2(WeightFormat, const uint8_t*, int64_t, const QuantizedRows&, int64_t, int,
                   float*, int64_t, int) {
  TESSERA_CHECK(false, "GroupTileAvx2: built without x86 SIMD");
}
}  // namespace tessera::kernels::cpu::int8_internal

#endif
