// AVX-512 VNNI copy of the int8 matmul kernels (int8_matmul_internal.h); same bits as the
// portable copy in int8_matmul.cc.
#include <cstdint>
#include <cstring>

#include "common/util/check.h"
#include "kernels/cpu/int8_matmul_internal.h"
#include "kernels/cpu/simd_target.h"

#if TESSERA_X86_SIMD
#include "kernels/cpu/simd_intrinsics.h"

TESSERA_BEGIN_TARGET_AVX512_VNNI
namespace tessera::kernels::cpu::int8_internal {
namespace {

TESSERA_SIMD_INLINE float MaxOfLanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float m = lanes[0];
  for (int i = 1; i < 16; ++i) m = lanes[i] > m ? lanes[i] : m;
  return m;
}

TESSERA_SIMD_INLINE int32_t SumOfLanes(__m512i v) {
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, v);
  int32_t s = 0;
  for (int i = 0; i < 16; ++i) s += lanes[i];
  return s;
}

TESSERA_SIMD_INLINE __m512i BroadcastDword(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// Codes of one block for all 16 rows: w[i] holds elements [4i, 4i + 4) of each row.
template <WeightFormat F>
TESSERA_SIMD_INLINE void LoadCodes(const uint8_t* codes, __m512i w[8]) {
  if constexpr (F == WeightFormat::kQ8_0) {
    for (int t = 0; t < 8; ++t) w[t] = _mm512_loadu_si512(codes + t * kChunkBytes);
  } else {
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int t = 0; t < 4; ++t) {
      const __m512i v = _mm512_loadu_si512(codes + t * kChunkBytes);
      w[2 * t] = _mm512_and_si512(v, low);
      w[2 * t + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    }
  }
}

template <WeightFormat F, int R>
void GroupTile(const uint8_t* group, int64_t blocks, const QuantizedRows& x, int64_t row0, float* y,
               int64_t ldy, int valid_cols) {
  constexpr Int8Layout kLayout = LayoutOf(F);
  constexpr int kOffset = kLayout.code_offset;
  constexpr bool kHasMin = kLayout.has_min;
  constexpr int kScaleBytes = kLayout.ScaleBytes();
  constexpr int kRecordBytes = kLayout.GroupBlockBytes();
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = group + b * kRecordBytes;
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m512 mw = _mm512_setzero_ps();
    if constexpr (kHasMin) {
      mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
    }
    __m512i w[8];
    LoadCodes<F>(p + kScaleBytes, w);
    for (int r = 0; r < R; ++r) {
      const int8_t* xq = x.q + (row0 + r) * x.k + b * kQuantBlockSize;
      const int64_t s = (row0 + r) * x.blocks + b;
      // Two independent chains (integer sums: the split changes no bits).
      __m512i even = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], BroadcastDword(xq));
      __m512i odd = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], BroadcastDword(xq + 4));
      for (int i = 2; i < 8; i += 2) {
        even = _mm512_dpbusd_epi32(even, w[i], BroadcastDword(xq + 4 * i));
        odd = _mm512_dpbusd_epi32(odd, w[i + 1], BroadcastDword(xq + 4 * i + 4));
      }
      __m512i isum = _mm512_add_epi32(even, odd);
      if constexpr (kOffset != 0) {
        isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(kOffset * x.xsum[s]));
      }
      const float dx = x.dx[s];
      acc[r] =
          _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dx)), _mm512_cvtepi32_ps(isum), acc[r]);
      if constexpr (kHasMin) {
        acc[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x.sx[s]), acc[r]);
      }
    }
  }
  const auto mask = static_cast<__mmask16>((1u << valid_cols) - 1u);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy, mask, acc[r]);
}

}  // namespace

void QuantizeRowVnni(const float* x, int64_t r, const QuantizedRows& rows) {
  for (int64_t b = 0; b < rows.blocks; ++b) {
    const float* xb = x + b * kQuantBlockSize;
    const __m512 lo = _mm512_loadu_ps(xb);
    const __m512 hi = _mm512_loadu_ps(xb + 16);
    const float amax = MaxOfLanes(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
    const __m512 inverse = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, inverse));  // nearest even
    const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, inverse));
    int8_t* qb = rows.q + r * rows.k + b * kQuantBlockSize;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtepi32_epi8(qlo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtepi32_epi8(qhi));
    const int64_t s = r * rows.blocks + b;
    rows.dx[s] = amax / 127.0f;
    rows.xsum[s] = SumOfLanes(_mm512_add_epi32(qlo, qhi));
    rows.sx[s] = rows.dx[s] * static_cast<float>(rows.xsum[s]);
  }
}

void GroupTileVnni(WeightFormat format, const uint8_t* group, int64_t blocks,
                   const QuantizedRows& x, int64_t row0, int rows, float* y, int64_t ldy,
                   int valid_cols) {
  WithTileShape(format, rows, [&](auto f, auto r) {
    GroupTile<decltype(f)::value, decltype(r)::value>(group, blocks, x, row0, y, ldy, valid_cols);
  });
}

}  // namespace tessera::kernels::cpu::int8_internal
TESSERA_END_TARGET

#else  // no x86 SIMD: Int8VnniSupported() is false, so these are never called.

namespace tessera::kernels::cpu::int8_internal {
void QuantizeRowVnni(const float*, int64_t, const QuantizedRows&) {
  TESSERA_CHECK(false, "QuantizeRowVnni: built without x86 SIMD");
}
void GroupTileVnni(WeightFormat, const uint8_t*, int64_t, const QuantizedRows&, int64_t, int,
                   float*, int64_t, int) {
  TESSERA_CHECK(false, "GroupTileVnni: built without x86 SIMD");
}
}  // namespace tessera::kernels::cpu::int8_internal

#endif
