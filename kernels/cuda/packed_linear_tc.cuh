// The decode path of packed_linear.cuh on tensor cores: Y[m, n] = Σ_k X[m, k]·W[n, k] for
// m <= 16, every weight read once as its packed codes, decoded in registers to exact small
// integers c (packed_decode.cuh: w = scale·c + min) in T and multiplied by mma.sync m16n8k16
// (X rows as A, padded with zero rows to 16; eight W rows as the columns of B), f32 accumulate.
//
// Why tensor cores at m = 1: the CUDA-core path (packed_linear_small_m.cuh) spent 7 (Q4_0) to 13
// (NVFP4) instructions per weight decoding each code to f32 and multiplying it (ncu on an H200,
// docs/perf/gpu-h200-2026-11-26-f03bba1.md), so it was issue-bound at 0.13–0.41 of the copy
// bandwidth. Here a code costs about one instruction (two codes per 32-bit operation: the nibble
// pair masked into the mantissas of two T values of 128 + c, or looked up by a byte permute for
// the FP4 codes, then one packed subtraction), and the multiply is 1/128 of an mma per lane.
//
// Work: a block of 8 warps owns 8 rows of W (one mma column tile) and splits the k range in 8
// parts of whole batches of kDepth units of 32 inputs, one per warp; the next batch's codes load
// while a batch is computed. In a unit, lane (g, t) = (lane / 4, lane % 4) holds W row n0 + g's codes: word t of
// the unit's 16 code bytes (8 codes; 8 bytes for Q8_0), or for NVFP4 (groups of 16) codes
// 4t..4t+3 of each of the unit's two groups. The mma's k order inside a group is free (the
// group's sum is the same), so each lane's codes become the B fragment as they decode, and its X
// values (X row g, and g + 8 for m > 8) are the matching A fragment: the same 8 inputs, permuted
// by byte permutes where the decode pairs code i with code i + 4. Per group the mma accumulates
// into a zeroed fragment, and acc += part·scale of its column (+ min·Σ x of its row, Σ x from an
// mma with B = ones) in f32, as every packed path does. The 8 warps' accumulators meet in shared
// memory and warp 0 adds them in warp order (deterministic), applies NVFP4's tensor scale and
// stores Y.
//
// Bound (H200, 4.1 TB/s copy bandwidth): designed for ~2.5–3 instructions per 4-bit weight
// (decode ~1.4, Q8_0 ~2.5, FP4 ~3; X permutes, scale epilogue and mma shares the rest), i.e.
// issue time ≈ memory time. Measured (docs/perf/gpu-h200-2026-11-26-packed.md): ncu counts 7.9
// (Q4_0) and 21 (NVFP4) instructions per weight at m = 1, so it is issue-bound like the CUDA-core
// path and slower than it at m <= 4 (m = 1, k = 14336: Q4_0 36.9 µs vs 25.8, NVFP4 68 vs 41.6);
// at m = 8 it takes half the CUDA-core path's time (Q4_0 15.4 vs 30.7 µs) and at m = 16 a third
// of the tiled tensor-core path's. The instruction count is the next thing to cut (SASS, on the
// GPU machine: the FP4 lookup and sign, the per-unit scale loads, the X permutes).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/packed_decode.cuh"
#include "kernels/cuda/ptx_ops.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace tessera::cuda {

inline constexpr int kPackedTcThreads = 256;
inline constexpr int kPackedTcWarps = kPackedTcThreads / 32;
inline constexpr int kPackedTcMaxM = 16;
inline constexpr int kPackedTcUnit = 32;  // inputs per unit

namespace packed_tc {

inline constexpr int kDepth = 8;  // units per batch; a batch loads while the previous computes

template <typename T>
inline constexpr ptx::MmaType kMmaType =
    std::is_same_v<T, __half> ? ptx::MmaType::kF16 : ptx::MmaType::kBf16;

// Both halves of a word the T value 128 (bf16) or 1024 (f16): a T with an integer u < 128 in
// its low mantissa bits is exactly base + u.
template <typename T>
inline constexpr uint32_t kMagicPair = std::is_same_v<T, __half> ? 0x64006400u : 0x43004300u;
template <typename T>
inline constexpr uint32_t kMagicByte = std::is_same_v<T, __half> ? 0x64u : 0x43u;
template <typename T>
inline constexpr uint32_t kOnesPair = std::is_same_v<T, __half> ? 0x3C003C00u : 0x3F803F80u;

// Byte permute (prmt.b32 in its default mode): byte i of the result is byte (selector >> 4i) & 7
// of {a (bytes 0-3), b (4-7)}, or, when bit 3 of that nibble is set, that byte's top bit
// replicated (0x00 or 0xFF).
__device__ __forceinline__ uint32_t Perm(uint32_t a, uint32_t b, uint32_t selector) {
#if defined(__CUDA_ARCH__)
  uint32_t out;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(out) : "r"(a), "r"(b), "r"(selector));
  return out;
#else
  const uint64_t bytes = a | (uint64_t{b} << 32);
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t nibble = (selector >> (4 * i)) & 15;
    uint32_t byte = (bytes >> (8 * (nibble & 7))) & 0xFF;
    if (nibble & 8) byte = (byte & 0x80) ? 0xFF : 0x00;
    out |= byte << (8 * i);
  }
  return out;
#endif
}

// (a & mask) | bits in one instruction (LOP3 with the three operands in registers; with two
// immediates the compiler emits two).
__device__ __forceinline__ uint32_t AndOr(uint32_t a, uint32_t mask, uint32_t bits) {
#if defined(__CUDA_ARCH__)
  uint32_t out;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(out) : "r"(a), "r"(mask), "r"(bits));
  return out;
#else
  return (a & mask) | bits;
#endif
}

// Each half of `a` minus the same half of `b`, as T (exact for the small integers used here).
template <typename T>
__device__ __forceinline__ uint32_t SubPairs(uint32_t a, uint32_t b) {
#if defined(__CUDACC__)
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&a),
                              *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  } else {
    const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                     *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
#else
  const float low = HalfOfWord<T>(a, false) - HalfOfWord<T>(b, false);
  const float high = HalfOfWord<T>(a, true) - HalfOfWord<T>(b, true);
  return packed_detail::PackPair<T>(low, high);
#endif
}

// Where a lane reads, fixed for the whole kernel: its codes in unit 0 of its W row (Q4 / MXFP4:
// word t of a unit; Q8_0: bytes 8t..8t+7; NVFP4: words t / 2 and 2 + t / 2, half t % 2), and
// group 0's scale fields of the two columns of its C fragment.
struct LaneView {
  const uint8_t* codes;
  const uint8_t* scales[2];
  const uint8_t* mins[2];
  const uint32_t* super[2];
};

template <PackedScheme kScheme>
__device__ __forceinline__ LaneView MakeLaneView(const PackedLinear& w, int code_row, int col0) {
  const int t = threadIdx.x % 32 % 4;
  const int groups = w.k / PackedGroupSize(kScheme);
  LaneView v{};
  const int lane_bytes = kScheme == PackedScheme::kQ8_0 ? 8 * t
                         : kScheme == PackedScheme::kNvfp4 ? 4 * (t / 2)
                                                           : 4 * t;
  v.codes = w.codes + int64_t{code_row} * PackedRowCodeBytes(kScheme, w.k) + lane_bytes;
  TESSERA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int64_t col = col0 + h < w.n ? col0 + h : w.n - 1;
    v.scales[h] = w.scales + col * groups * PackedScaleBytes(kScheme);
    v.mins[h] = PackedHasMins(kScheme) ? w.mins + col * groups * PackedMinBytes(kScheme) : nullptr;
    v.super[h] = kScheme == PackedScheme::kQ4_K
                     ? reinterpret_cast<const uint32_t*>(w.super_scales) + col * (w.k / 256)
                     : nullptr;
  }
  return v;
}

template <PackedScheme kScheme>
inline constexpr int kGroupsPerUnit = kPackedTcUnit / PackedGroupSize(kScheme);

// Code bytes of one unit of a row.
template <PackedScheme kScheme>
inline constexpr int kUnitCodeBytes = kPackedTcUnit * PackedCodeBits(kScheme) / 8;

// The lane's codes of one unit (`p`: the lane's address in that unit, LaneView::codes + unit
// bytes).
template <PackedScheme kScheme>
__device__ __forceinline__ uint2 LoadCodes(const uint8_t* p) {
  if constexpr (kScheme == PackedScheme::kQ8_0) {
    return __ldg(reinterpret_cast<const uint2*>(p));
  } else if constexpr (kScheme == PackedScheme::kNvfp4) {
    const uint32_t* words = reinterpret_cast<const uint32_t*>(p);
    const uint32_t shift = 16 * (threadIdx.x % 32 % 4 % 2);
    const uint32_t first = __ldg(words), second = __ldg(words + 2);
    return make_uint2(((first >> shift) & 0xFFFFu) | (((second >> shift) & 0xFFFFu) << 16), 0u);
  } else {
    return make_uint2(__ldg(reinterpret_cast<const uint32_t*>(p)), 0u);
  }
}

// The lane's 8 inputs of one X row for one unit (`base`: the unit's first input; zeros unless
// `valid`):
// inputs 8t..8t+7 of the unit, for NVFP4 inputs 4t..4t+3 (v[0], v[1]) and 16 + 4t..+3 (v[2],
// v[3]). Pairs of T per word.
template <PackedScheme kScheme, typename T>
__device__ __forceinline__ uint4 LoadX(const T* base, bool valid, int t) {
  if (!valid) return make_uint4(0u, 0u, 0u, 0u);
  if constexpr (kScheme == PackedScheme::kNvfp4) {
    const uint2 first = *reinterpret_cast<const uint2*>(base + 4 * t);
    const uint2 second = *reinterpret_cast<const uint2*>(base + 16 + 4 * t);
    return make_uint4(first.x, first.y, second.x, second.y);
  } else {
    return *reinterpret_cast<const uint4*>(base + 8 * t);
  }
}

// Whether the decode pairs code i with code i + 4 (the masked-nibble schemes) rather than with
// code i + 1.
template <PackedScheme kScheme>
inline constexpr bool kStridedPairs = kScheme == PackedScheme::kQ4_0 ||
                                      kScheme == PackedScheme::kQ4_1 ||
                                      kScheme == PackedScheme::kQ4_K;

// A-fragment halves (k 2t, 2t+1 and 2t+8, 2t+9 of mma step `step`) from one row's 8 inputs.
template <PackedScheme kScheme>
__device__ __forceinline__ void XPairs(const uint4& v, int step, uint32_t& low, uint32_t& high) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  if constexpr (kStridedPairs<kScheme>) {  // inputs (2s, 2s + 4) and (2s + 1, 2s + 5)
    low = Perm(words[step], words[step + 2], 0x5410);
    high = Perm(words[step], words[step + 2], 0x7632);
  } else {  // inputs (4s, 4s + 1) and (4s + 2, 4s + 3)
    low = words[2 * step];
    high = words[2 * step + 1];
  }
}

// The four T pairs of a 4-bit word of codes c0..c7, each its exact small integer c
// (packed_decode.cuh). The masked-nibble schemes pair (c_i, c_i+4): the nibble pair masked into
// the mantissas of two T values 128 + c (f16: 1024 + c), minus 128 (and 8 more for Q4_0's
// c = q - 8). FP4 pairs (c_2i, c_2i+1): 2·|e2m1| {0, 1, 2, 3, 4, 6, 8, 12} looked up by a byte
// permute, made T the same way, and the sign bits (bit 3 of each nibble) replicated into place
// by another.
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void DecodeWord4(uint32_t word, uint32_t (&pairs)[4]) {
  if constexpr (kStridedPairs<kScheme>) {
    constexpr uint32_t kBias = kMagicPair<T> + (kScheme == PackedScheme::kQ4_0 ? 0x00080008u : 0u);
    TESSERA_UNROLL
    for (int i = 0; i < 4; ++i) {
      pairs[i] = SubPairs<T>(AndOr(word >> (4 * i), 0x000F000Fu, kMagicPair<T>), kBias);
    }
  } else {
    const uint32_t selector = word & 0x77777777u;
    const uint32_t magnitudes[2] = {Perm(0x03020100u, 0x0C080604u, selector),
                                    Perm(0x03020100u, 0x0C080604u, selector >> 16)};
    const uint32_t shifted = word << 4;  // bit 3 of each low nibble at its byte's top
    TESSERA_UNROLL
    for (int i = 0; i < 4; ++i) {
      const uint32_t magnitude = SubPairs<T>(
          Perm(magnitudes[i / 2], kMagicByte<T> * 0x01010101u, i % 2 == 0 ? 0x4140u : 0x4342u),
          kMagicPair<T>);
      const uint32_t signs = Perm(shifted, word, ((0xCu + i) << 12) | ((0x8u + i) << 4));
      pairs[i] = magnitude | (signs & 0x80008000u);
    }
  }
}

// The two T pairs of a Q8_0 word (codes q0..q3): (q0, q1), (q2, q3).
template <typename T>
__device__ __forceinline__ void DecodeWord8(uint32_t word, uint32_t (&pairs)[2]) {
  TESSERA_UNROLL
  for (int i = 0; i < 2; ++i) {
    if constexpr (std::is_same_v<T, __half>) {  // 1024 + (q + 128) - 1152
      pairs[i] = SubPairs<T>(Perm(word ^ 0x80808080u, 0x64646464u, i == 0 ? 0x4140u : 0x4342u),
                             0x64806480u);
    } else {  // (128 + low 7 bits) - (128 + 128·sign bit)
      const uint32_t raw = Perm(word, 0x43434343u, i == 0 ? 0x4140u : 0x4342u);
      pairs[i] = SubPairs<T>(raw & 0xFF7FFF7Fu, raw & 0xFF80FF80u);
    }
  }
}

// B fragments of the unit's two mma steps from the lane's codes.
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void DecodeB(const uint2& codes, uint32_t (&b)[2][2]) {
  if constexpr (kScheme == PackedScheme::kQ8_0) {
    DecodeWord8<T>(codes.x, b[0]);
    DecodeWord8<T>(codes.y, b[1]);
  } else {
    uint32_t pairs[4];
    DecodeWord4<T, kScheme>(codes.x, pairs);
    b[0][0] = pairs[0], b[0][1] = pairs[1], b[1][0] = pairs[2], b[1][1] = pairs[3];
  }
}

// A lane's codes for one batch of kDepth units.
struct Batch {
  uint2 codes[kDepth];
};

// Batch `u` (units past u1 repeat unit u1 - 1, never used).
template <PackedScheme kScheme>
__device__ __forceinline__ void LoadBatch(const LaneView& v, int u, int u1, Batch& b) {
  const uint8_t* base = v.codes + int64_t{u} * kUnitCodeBytes<kScheme>;
  if (u + kDepth <= u1) {  // a whole batch (warp-uniform): constant offsets
    TESSERA_UNROLL
    for (int d = 0; d < kDepth; ++d) b.codes[d] = LoadCodes<kScheme>(base + d * kUnitCodeBytes<kScheme>);
    return;
  }
  TESSERA_UNROLL
  for (int d = 0; d < kDepth; ++d) {
    b.codes[d] = LoadCodes<kScheme>(base + (u + d < u1 ? d : u1 - 1 - u) * kUnitCodeBytes<kScheme>);
  }
}

// Where a batch's group fields start for the two columns of the lane's C fragment, and Q4_K's
// super-scale words (a batch is one super-group).
struct BatchScales {
  const uint8_t* scales[2];
  const uint8_t* mins[2];
  uint32_t super[2];
};

template <PackedScheme kScheme>
__device__ __forceinline__ BatchScales ScalesOfBatch(const LaneView& v, int u) {
  BatchScales s{};
  const int first_group = u * kGroupsPerUnit<kScheme>;
  TESSERA_UNROLL
  for (int h = 0; h < 2; ++h) {
    s.scales[h] = v.scales[h] + first_group * PackedScaleBytes(kScheme);
    if constexpr (PackedHasMins(kScheme)) {
      s.mins[h] = v.mins[h] + first_group * PackedMinBytes(kScheme);
    }
    if constexpr (kScheme == PackedScheme::kQ4_K) s.super[h] = __ldg(v.super[h] + u / kDepth);
  }
  return s;
}

// acc += part·scale of each C element's column (+ min·Σ x of its row), the scales of the batch's
// group `group`, loaded here (L1 hits after the first lane of a line; loading a batch's ahead cost
// registers and occupancy, and measured slower on an H200); rows g + 8 only for m > 8.
template <PackedScheme kScheme, bool kM16>
__device__ __forceinline__ void ApplyScale(const BatchScales& s_b, int group,
                                           const float (&part)[4], const float (&xsum)[4],
                                           float (&acc)[4]) {
  TESSERA_UNROLL
  for (int h = 0; h < 2; ++h) {
    packed_detail::RawGroupScale raw;
    if constexpr (PackedScaleBytes(kScheme) == 2) {
      raw.scale = __ldg(reinterpret_cast<const unsigned short*>(s_b.scales[h]) + group);
    } else {
      raw.scale = __ldg(s_b.scales[h] + group);
    }
    if constexpr (kScheme == PackedScheme::kQ4_1) {
      raw.min = __ldg(reinterpret_cast<const unsigned short*>(s_b.mins[h]) + group);
    } else if constexpr (kScheme == PackedScheme::kQ4_K) {
      raw.min = __ldg(s_b.mins[h] + group);
      raw.super = s_b.super[h];
    }
    const packed_detail::GroupScale s = packed_detail::DecodeGroupScale<kScheme>(raw);
    TESSERA_UNROLL
    for (int r = 0; r < (kM16 ? 2 : 1); ++r) {
      const int i = 2 * r + h;
      acc[i] = __fmaf_rn(part[i], s.scale, acc[i]);
      if constexpr (PackedHasMins(kScheme)) acc[i] = __fmaf_rn(s.min, xsum[i], acc[i]);
    }
  }
}

// Unit d of a batch: its codes and X rows, into acc.
template <typename T, PackedScheme kScheme, bool kM16>
__device__ __forceinline__ void ComputeUnit(const BatchScales& scales, const Batch& batch,
                                            int d, const uint4& x_low, const uint4& x_high,
                                            float (&acc)[4]) {
  uint32_t a[2][4];
  TESSERA_UNROLL
  for (int step = 0; step < 2; ++step) {
    XPairs<kScheme>(x_low, step, a[step][0], a[step][2]);
    if constexpr (kM16) {
      XPairs<kScheme>(x_high, step, a[step][1], a[step][3]);
    } else {
      a[step][1] = a[step][3] = 0u;
    }
  }
  float xsum[4] = {};  // Σ x of each C element's row over the unit (schemes with mins)
  if constexpr (PackedHasMins(kScheme)) {
    const uint32_t ones[2] = {kOnesPair<T>, kOnesPair<T>};
    ptx::MmaM16N8K16<kMmaType<T>>(xsum, a[0], ones, xsum);
    ptx::MmaM16N8K16<kMmaType<T>>(xsum, a[1], ones, xsum);
  }
  uint32_t b[2][2];
  DecodeB<T, kScheme>(batch.codes[d], b);
  if constexpr (kScheme == PackedScheme::kNvfp4) {  // a group per step
    TESSERA_UNROLL
    for (int step = 0; step < 2; ++step) {
      float part[4] = {};
      ptx::MmaM16N8K16<kMmaType<T>>(part, a[step], b[step], part);
      ApplyScale<kScheme, kM16>(scales, 2 * d + step, part, xsum, acc);
    }
  } else {
    float part[4] = {};
    ptx::MmaM16N8K16<kMmaType<T>>(part, a[0], b[0], part);
    ptx::MmaM16N8K16<kMmaType<T>>(part, a[1], b[1], part);
    ApplyScale<kScheme, kM16>(scales, d, part, xsum, acc);
  }
}

// Blocks per SM the register cap asks for: 4 (64 registers); 3 (85) for Q4_K, which spills at
// 64 on sm_100a; 2 (128) for Q8_0 at m > 8, which spills at 85 there (CUDA 13). Measured (H200,
// kit runs of 67899d6 and b35149e): Q8_0 at m = 8 and NVFP4 at m = 16 took 19.6 and 25.8 µs at
// 63-64 registers, 25.4 and 32.8 µs once a decode change let ptxas use 67 and 72 (3 blocks per
// SM instead of 4).
template <PackedScheme kScheme, bool kM16>
inline constexpr int kMinBlocks = kScheme == PackedScheme::kQ8_0 && kM16 ? 2
                                  : kScheme == PackedScheme::kQ4_K     ? 3
                                                                       : 4;

}  // namespace packed_tc

// Grid n / 8 (rounded up), kPackedTcThreads threads. kM16: m > 8 (X rows g + 8 too).
template <typename T, PackedScheme kScheme, bool kM16>
__global__ void __launch_bounds__(kPackedTcThreads, packed_tc::kMinBlocks<kScheme, kM16>)
    PackedLinearTcKernel(const T* __restrict__ x, int m, PackedLinear w, T* __restrict__ y) {
  using namespace packed_tc;
  TESSERA_SHARED(float, partials, kPackedTcWarps * 4 * 32);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * 8;
  // The warps split the units in whole batches (a batch's groups start at a multiple of kDepth,
  // Q4_K's super-group).
  const int units = w.k / kPackedTcUnit;
  const int batches = (units + kDepth - 1) / kDepth;
  const int u0 = batches * warp / kPackedTcWarps * kDepth;
  const int u1_batches = batches * (warp + 1) / kPackedTcWarps * kDepth;
  const int u1 = u1_batches < units ? u1_batches : units;
  const LaneView view = MakeLaneView<kScheme>(w, n0 + g < w.n ? n0 + g : w.n - 1, n0 + 2 * t);
  const T* x_low_row = x + int64_t{g} * w.k;
  const T* x_high_row = x + int64_t{g + 8} * w.k;
  float acc[4] = {};
  // Double-buffered: the next batch's codes load while this one is decoded and multiplied; X
  // and the group scales (small, L1/L2-resident) are loaded at their use.
  Batch batch, next;
  if (u0 < u1) LoadBatch<kScheme>(view, u0, u1, batch);  // an empty part loads none
  for (int u = u0; u < u1; u += kDepth) {  // warp-uniform
    if (u + kDepth < u1) LoadBatch<kScheme>(view, u + kDepth, u1, next);
    const BatchScales scales = ScalesOfBatch<kScheme>(view, u);
    const T* x_low_batch = x_low_row + u * kPackedTcUnit;
    const T* x_high_batch = x_high_row + u * kPackedTcUnit;
    TESSERA_UNROLL
    for (int d = 0; d < kDepth; ++d) {
      if (u + d < u1) {
        const uint4 x_low = LoadX<kScheme>(x_low_batch + d * kPackedTcUnit, g < m, t);
        const uint4 x_high = kM16 ? LoadX<kScheme>(x_high_batch + d * kPackedTcUnit, g + 8 < m, t)
                                  : make_uint4(0u, 0u, 0u, 0u);
        ComputeUnit<T, kScheme, kM16>(scales, batch, d, x_low, x_high, acc);
      }
    }
    batch = next;
  }
  TESSERA_UNROLL
  for (int i = 0; i < 4; ++i) partials[(warp * 4 + i) * 32 + lane] = acc[i];
  __syncthreads();
  if (warp != 0) return;
  const float scale = kScheme == PackedScheme::kNvfp4 ? w.tensor_scale : 1.0f;
  float total[4] = {};
  for (int from = 0; from < kPackedTcWarps; ++from) {
    TESSERA_UNROLL
    for (int i = 0; i < 4; ++i) total[i] += partials[(from * 4 + i) * 32 + lane];
  }
  const int col = n0 + 2 * t;
  TESSERA_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    if (row >= m || col >= w.n) continue;
    *reinterpret_cast<uint32_t*>(y + int64_t{row} * w.n + col) =
        packed_detail::PackPair<T>(total[2 * r] * scale, total[2 * r + 1] * scale);
  }
}

}  // namespace tessera::cuda
