// GGUF tensor encodings decoded on the device, eight consecutive elements at a time: shared by the
// load-time dequantizer (dequantize.cuh) and the embedding gather (embedding.cuh).
//
// Block layouts (all little-endian, d/m/dmin IEEE halves; the CPU decoders in
// common/gguf/dequantize.cc and dequantize_kquants.cc are the reference):
//   Q8_0 {d, qs[32] int8}                    34 bytes   x = q * d
//   Q4_0 {d, qs[16]}                         18 bytes   x = (nibble - 8) * d
//   Q4_1 {d, m, qs[16]}                      20 bytes   x = nibble * d + m
//     (4-bit blocks: byte j holds element j in its low nibble and element j + 16 in its high one)
//   Q4_K {d, dmin, scales[12], qs[128]}     144 bytes   x = (d * sc) * nibble - (dmin * mn)
//     (64-element chunk c: elements 0..31 are the low nibbles of qs[32c..32c+31] with sub-block
//      2c's 6-bit scale/min, elements 32..63 the high nibbles with sub-block 2c + 1's)
//   Q6_K {ql[128], qh[64], scales[16] int8, d} 210 bytes x = (d * sc) * (q6 - 32)
//     (128-element half h, element 32k + l: 4 low bits from ql[64h + l (+32 for k odd)], low
//      nibble for k < 2, high for k >= 2; 2 high bits from qh[32h + l] bits 2k..2k+1;
//      scale sc[8h + l / 16 + 2k])
//
// Every value is computed with the same f32 operations, in the same order, as the CPU decoder.
// Products go through __fmul_rn so nvcc cannot contract `a * b - c` into an fma: the device
// result is then bit-identical to the CPU's (which is built with -ffp-contract=off), not just
// within an ulp. A group of 8 never straddles a block (every block size is a multiple of 8) nor,
// in a K-quant, a 16- or 32-element sub-block, so a group has one scale (and one min).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace tessera::cuda {

// The encodings the kernels read. Values are ours, not ggml's type ids.
enum class GgufFormat : int { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_1, kQ4_K, kQ6_K };

inline constexpr int kGroupElements = 8;  // elements decoded per call

// Elements and bytes of one block (one element for the plain formats).
__host__ __device__ constexpr int BlockElements(GgufFormat format) {
  switch (format) {
    case GgufFormat::kQ8_0:
    case GgufFormat::kQ4_0:
    case GgufFormat::kQ4_1:
      return 32;
    case GgufFormat::kQ4_K:
    case GgufFormat::kQ6_K:
      return 256;
    default:
      return 1;
  }
}

__host__ __device__ constexpr int BlockBytes(GgufFormat format) {
  switch (format) {
    case GgufFormat::kF32: return 4;
    case GgufFormat::kF16: return 2;
    case GgufFormat::kBF16: return 2;
    case GgufFormat::kQ8_0: return 34;
    case GgufFormat::kQ4_0: return 18;
    case GgufFormat::kQ4_1: return 20;
    case GgufFormat::kQ4_K: return 144;
    case GgufFormat::kQ6_K: return 210;
  }
  return 0;
}

// Bytes of a row of `cols` elements. Precondition: cols % BlockElements(format) == 0.
__host__ __device__ constexpr int64_t GgufRowBytes(GgufFormat format, int64_t cols) {
  return cols / BlockElements(format) * BlockBytes(format);
}

// Unaligned little-endian loads (blocks are 2-byte aligned at best).
__device__ __forceinline__ unsigned LoadU16(const uint8_t* p) {
  return static_cast<unsigned>(p[0]) | (static_cast<unsigned>(p[1]) << 8);
}
__device__ __forceinline__ float LoadHalfBits(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(LoadU16(p))));
}
__device__ __forceinline__ float LoadBf16Bits(const uint8_t* p) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(LoadU16(p))));
}
__device__ __forceinline__ float LoadF32Bits(const uint8_t* p) {
  return __uint_as_float(LoadU16(p) | (LoadU16(p + 2) << 16));
}

// Q4_K's packed 6-bit scale (or, with `min` set, min) of sub-block j in 0..7 (ggml's
// get_scale_min_k4): sub-blocks 0..3 in the low 6 bits of bytes j (scale) and j + 4 (min),
// sub-blocks 4..7 with low 4 bits from byte j + 4's nibbles and top 2 bits from bytes j - 4 / j.
__device__ __forceinline__ int Q4KScaleOrMin(const uint8_t* q, int j, bool min) {
  if (j < 4) return q[j + (min ? 4 : 0)] & 63;
  return min ? ((q[j + 4] >> 4) | ((q[j] >> 6) << 4)) : ((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
}

// Elements [first, first + 8) of block `block`, first % 8 == 0 and < BlockElements(kFormat).
template <GgufFormat kFormat>
__device__ __forceinline__ void DecodeBlockGroup(const uint8_t* block, int first, float* v) {
  if constexpr (kFormat == GgufFormat::kQ8_0) {
    const float d = LoadHalfBits(block);
    for (int k = 0; k < 8; ++k) {
      v[k] = __fmul_rn(static_cast<float>(static_cast<int8_t>(block[2 + first + k])), d);
    }
  } else if constexpr (kFormat == GgufFormat::kQ4_0 || kFormat == GgufFormat::kQ4_1) {
    const bool has_min = kFormat == GgufFormat::kQ4_1;
    const float d = LoadHalfBits(block);
    const float m = has_min ? LoadHalfBits(block + 2) : 0.0f;
    const uint8_t* qs = block + (has_min ? 4 : 2) + (first & 15);
    const int shift = first >= 16 ? 4 : 0;
    for (int k = 0; k < 8; ++k) {
      const int nibble = (qs[k] >> shift) & 0x0F;
      v[k] = has_min ? __fmul_rn(static_cast<float>(nibble), d) + m
                     : __fmul_rn(static_cast<float>(nibble - 8), d);
    }
  } else if constexpr (kFormat == GgufFormat::kQ4_K) {
    const int chunk = first / 64;
    const int high = (first / 32) & 1;  // which sub-block of the chunk
    const int sub = 2 * chunk + high;
    const float d = __fmul_rn(LoadHalfBits(block), static_cast<float>(Q4KScaleOrMin(block + 4, sub, false)));
    const float m = __fmul_rn(LoadHalfBits(block + 2), static_cast<float>(Q4KScaleOrMin(block + 4, sub, true)));
    const uint8_t* qs = block + 16 + 32 * chunk + (first & 31);
    for (int k = 0; k < 8; ++k) {
      v[k] = __fmul_rn(d, static_cast<float>((qs[k] >> (4 * high)) & 0x0F)) - m;
    }
  } else if constexpr (kFormat == GgufFormat::kQ6_K) {
    const int half = first / 128;
    const int quarter = (first / 32) & 3;  // k of the layout above
    const int l0 = first & 31;
    const uint8_t* ql = block + 64 * half + (quarter & 1) * 32 + l0;
    const uint8_t* qh = block + 128 + 32 * half + l0;
    const int scale = static_cast<int8_t>(block[192 + 8 * half + l0 / 16 + 2 * quarter]);
    const float d = __fmul_rn(LoadHalfBits(block + 208), static_cast<float>(scale));
    const int low_shift = quarter >= 2 ? 4 : 0;
    for (int k = 0; k < 8; ++k) {
      const int q = (((ql[k] >> low_shift) & 0x0F) | (((qh[k] >> (2 * quarter)) & 3) << 4)) - 32;
      v[k] = __fmul_rn(d, static_cast<float>(q));
    }
  }
}

// Up to 8 elements [first, first + count) of a plain-format array (count <= 8).
template <GgufFormat kFormat>
__device__ __forceinline__ void DecodePlainGroup(const uint8_t* data, int64_t first, int count,
                                                 float* v) {
  constexpr int kBytes = BlockBytes(kFormat);
  const uint8_t* p = data + first * kBytes;
  if (count == 8 && Aligned16(p)) {  // 16-byte vector loads
    using Stored = std::conditional_t<kFormat == GgufFormat::kF32, float,
                   std::conditional_t<kFormat == GgufFormat::kF16, __half, __nv_bfloat16>>;
    const Stored* typed = reinterpret_cast<const Stored*>(p);
    for (int k = 0; k < 8; k += kVec16<Stored>) Load16(typed + k, v + k);
    return;
  }
  for (int k = 0; k < 8; ++k) {
    v[k] = 0.0f;
    if (k >= count) continue;
    if constexpr (kFormat == GgufFormat::kF32) v[k] = LoadF32Bits(p + 4 * k);
    if constexpr (kFormat == GgufFormat::kF16) v[k] = LoadHalfBits(p + 2 * k);
    if constexpr (kFormat == GgufFormat::kBF16) v[k] = LoadBf16Bits(p + 2 * k);
  }
}

// Elements [first, first + count) of an encoded array (a tensor, or one row of one) starting at
// `data`. For block formats first % 8 == 0 and count == 8; for plain formats count <= 8.
template <GgufFormat kFormat>
__device__ __forceinline__ void DecodeGroup(const uint8_t* data, int64_t first, int count,
                                            float* v) {
  constexpr int kElements = BlockElements(kFormat);
  if constexpr (kElements == 1) {
    DecodePlainGroup<kFormat>(data, first, count, v);
  } else {
    const uint8_t* block = data + (first / kElements) * BlockBytes(kFormat);
    DecodeBlockGroup<kFormat>(block, static_cast<int>(first % kElements), v);
  }
}

// Stores v[0..count) converted to T at dst. With count == 8 and dst 16-byte aligned, 16-byte
// vector stores (one for 2-byte T, two for f32); otherwise element by element.
template <typename T>
__device__ __forceinline__ void StoreGroup(T* dst, const float* v, int count) {
  if (count == 8 && Aligned16(dst)) {
    for (int k = 0; k < 8; k += kVec16<T>) Store16(dst + k, v + k);
    return;
  }
  // Fixed trip count with a guard (not `k < count`) so v stays in registers on the GPU.
  for (int k = 0; k < 8; ++k) {
    if (k < count) dst[k] = FromFloat<T>(v[k]);
  }
}

}  // namespace tessera::cuda
