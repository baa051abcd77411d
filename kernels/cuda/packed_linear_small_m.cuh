// The small-M (decode) path of packed_linear.cuh: Y[m, n] = Σ_k X[m, k]·W[n, k] for m <= 8 on
// CUDA cores, reading the packed codes once with 16-byte loads (design and bound in
// packed_linear.cuh).
//
// A block of 8 warps owns 16 consecutive output columns n (rows of W), 2 per warp; the block
// stages X (all m rows, a chunk of k) in shared memory as f32, then each lane takes 16 bytes of
// codes of each of its warp's two W rows per step (32 inputs for 4-bit codes, 16 for Q8_0),
// lanes side by side along k (a warp reads 512 contiguous bytes per row), the next 2 steps'
// codes and raw scales (4 for m <= 2) already loading while this one is decoded. Per group (or the
// lane's part of one) a lane sums Σ x·c for every X row in f32, then acc += scale·Σ x·c (+ min·Σ x,
// the group sums of X staged with it); a warp reduction ends each output. Shared memory for X is
// padded by 4 floats after every lane's inputs, so the lanes' 16-byte reads hit distinct banks.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/packed_decode.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace tessera::cuda {

inline constexpr int kPackedSmallMThreads = 256;
inline constexpr int kPackedSmallMRowsPerWarp = 2;
inline constexpr int kPackedSmallMRowsPerBlock =
    kPackedSmallMThreads / 32 * kPackedSmallMRowsPerWarp;
inline constexpr int kPackedSmallMMaxM = 8;

namespace packed_small_m {

// Inputs one lane decodes per step (one 16-byte load), and a warp's step.
template <PackedScheme kScheme>
inline constexpr int kLaneInputs = 128 / PackedCodeBits(kScheme);
template <PackedScheme kScheme>
inline constexpr int kSpan = 32 * kLaneInputs<kScheme>;
// Inputs of X staged at a time: kM * kChunk floats (32 KiB + padding), at least one span.
template <PackedScheme kScheme, int kM>
inline constexpr int kChunk = 8192 / kM > kSpan<kScheme> ? 8192 / kM : kSpan<kScheme>;
template <PackedScheme kScheme>
__host__ __device__ constexpr int Padded(int e) {
  return e + 4 * (e / kLaneInputs<kScheme>);
}
template <PackedScheme kScheme, int kM>
inline constexpr int kStride = Padded<kScheme>(kChunk<kScheme, kM>);  // floats per X row
template <PackedScheme kScheme, int kM>
inline constexpr int kSumsPerRow = kChunk<kScheme, kM> / 32;  // 32-input group sums

// xs[r][Padded(e)] = X[r][k0 + e] as f32 for e < chunk (zeros for rows r >= m) and, for schemes
// with mins, sums[r][e / 32] = Σ of those 32 inputs. One thread per 8 inputs (a 16-byte load);
// the trip count is block-uniform because 4 neighbouring lanes add their parts by shuffles.
template <typename T, PackedScheme kScheme, int kM>
__device__ __forceinline__ void StageX(const T* x, int m, int k, int k0, int chunk, float* xs,
                                       float* sums) {
  const int pieces = kM * (chunk / 8);
  for (int base = 0; base < pieces; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const int r = i / (chunk / 8), e = i % (chunk / 8) * 8;
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (i < pieces && r < m) Load16(x + int64_t{r} * k + k0 + e, v);
    if (i < pieces) {
      float4* to = reinterpret_cast<float4*>(xs + r * kStride<kScheme, kM> + Padded<kScheme>(e));
      to[0] = make_float4(v[0], v[1], v[2], v[3]);
      to[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    if constexpr (PackedHasMins(kScheme)) {
      float sum = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
      sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
      sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
      if (i < pieces && threadIdx.x % 4 == 0) sums[r * kSumsPerRow<kScheme, kM> + e / 32] = sum;
    }
  }
}

// Inputs under one scale in a lane's step (16 for NVFP4 and Q8_0, else 32) and scales per step.
template <PackedScheme kScheme>
inline constexpr int kPart = kLaneInputs<kScheme> < PackedGroupSize(kScheme)
                                 ? kLaneInputs<kScheme>
                                 : PackedGroupSize(kScheme);
template <PackedScheme kScheme>
inline constexpr int kParts = kLaneInputs<kScheme> / kPart<kScheme>;

// What a lane loads for one step: 16 bytes of codes and the raw scales of each of its warp's
// rows (zeros past n or k).
template <PackedScheme kScheme>
struct Step {
  uint4 codes[kPackedSmallMRowsPerWarp];
  packed_detail::RawGroupScale scales[kPackedSmallMRowsPerWarp][kParts<kScheme>];
};

template <PackedScheme kScheme>
__device__ __forceinline__ Step<kScheme> LoadStep(const PackedLinear& w, int row0, int e) {
  Step<kScheme> step;
  const bool inside = row0 < w.n && e < w.k;  // n is even: row0 + 1 < n too
  TESSERA_UNROLL
  for (int r = 0; r < kPackedSmallMRowsPerWarp; ++r) {
    const uint8_t* p = w.codes + int64_t{row0 + r} * PackedRowCodeBytes(kScheme, w.k) +
                       int64_t{e} * PackedCodeBits(kScheme) / 8;
    step.codes[r] = inside ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
    TESSERA_UNROLL
    for (int part = 0; part < kParts<kScheme>; ++part) {
      const int group = (e + part * kPart<kScheme>) / PackedGroupSize(kScheme);
      step.scales[r][part] = inside ? packed_detail::LoadRawGroupScale<kScheme>(w, row0 + r, group)
                                    : packed_detail::RawGroupScale{};
    }
  }
  return step;
}

// Word j (0..3) of 16 loaded bytes.
__device__ __forceinline__ unsigned WordOf(const uint4& v, int j) {
  if (j == 0) return v.x;
  if (j == 1) return v.y;
  return j == 2 ? v.z : v.w;
}

// xv[i] = X row mm at the chunk's input local + j·(codes per word) + i (word j of a step).
template <PackedScheme kScheme, int kM, int kCodesPerWord>
__device__ __forceinline__ void LoadXWord(const float* xs, int mm, int local, int j,
                                          float (&xv)[kCodesPerWord]) {
  const float4* from = reinterpret_cast<const float4*>(xs + mm * kStride<kScheme, kM> +
                                                       Padded<kScheme>(local) + j * kCodesPerWord);
  TESSERA_UNROLL
  for (int q = 0; q < kCodesPerWord / 4; ++q) {
    const float4 f = from[q];
    xv[4 * q] = f.x, xv[4 * q + 1] = f.y, xv[4 * q + 2] = f.z, xv[4 * q + 3] = f.w;
  }
}

// acc[r][mm] += one lane's step (its codes of rows row0 + r at the chunk's input `local`)
// against every X row mm.
template <PackedScheme kScheme, int kM>
__device__ __forceinline__ void AccumulateStep(const Step<kScheme>& step, int local,
                                               const float* xs, const float* sums,
                                               float (&acc)[kPackedSmallMRowsPerWarp][kM]) {
  constexpr int kR = kPackedSmallMRowsPerWarp;
  constexpr int kCodesPerWord = 32 / PackedCodeBits(kScheme);
  constexpr int kWordsPerPart = kPart<kScheme> / kCodesPerWord;
  const uint4(&codes)[kR] = step.codes;
  TESSERA_UNROLL
  for (int part = 0; part < kParts<kScheme>; ++part) {
    float dot[kR][kM] = {};
    TESSERA_UNROLL
    for (int j = part * kWordsPerPart; j < (part + 1) * kWordsPerPart; ++j) {
      float c[kR][kCodesPerWord];  // decoded once, used for every X row
      TESSERA_UNROLL
      for (int r = 0; r < kR; ++r) {
        const unsigned word = WordOf(codes[r], j);
        TESSERA_UNROLL
        for (int i = 0; i < kCodesPerWord; ++i) {
          c[r][i] = packed_detail::CodeValue<kScheme>(packed_detail::CodeOfWord<kScheme>(word, i));
        }
      }
      TESSERA_UNROLL
      for (int mm = 0; mm < kM; ++mm) {
        float xv[kCodesPerWord];
        LoadXWord<kScheme, kM, kCodesPerWord>(xs, mm, local, j, xv);
        TESSERA_UNROLL
        for (int r = 0; r < kR; ++r) {
          TESSERA_UNROLL
          for (int i = 0; i < kCodesPerWord; ++i)
            dot[r][mm] = __fmaf_rn(xv[i], c[r][i], dot[r][mm]);
        }
      }
    }
    TESSERA_UNROLL
    for (int r = 0; r < kR; ++r) {
      const packed_detail::GroupScale scale =
          packed_detail::DecodeGroupScale<kScheme>(step.scales[r][part]);
      TESSERA_UNROLL
      for (int mm = 0; mm < kM; ++mm) {
        acc[r][mm] = __fmaf_rn(scale.scale, dot[r][mm], acc[r][mm]);
        if constexpr (PackedHasMins(kScheme)) {  // kPart == 32: the lane's step is one group
          acc[r][mm] =
              __fmaf_rn(scale.min, sums[mm * kSumsPerRow<kScheme, kM> + local / 32], acc[r][mm]);
        }
      }
    }
  }
}

}  // namespace packed_small_m

// kM: m rounded up to 1, 2, 4 or 8 (rows m..kM-1 of X read as zeros, never written). The
// minimum of 2 blocks per SM for kM <= 4 caps registers at 128; without it ptxas picks a tighter
// cap on its own and spills (CUDA 13).
template <typename T, PackedScheme kScheme, int kM>
__global__ void __launch_bounds__(kPackedSmallMThreads, kM <= 4 ? 2 : 1)
    PackedLinearSmallMKernel(const T* __restrict__ x, int m, PackedLinear w, T* __restrict__ y) {
  using namespace packed_small_m;
  constexpr int kR = kPackedSmallMRowsPerWarp;
  constexpr int kSpansPerChunk = kChunk<kScheme, kM> / kSpan<kScheme>;
  constexpr int kXsFloats = kM * kStride<kScheme, kM>;
  constexpr int kSumFloats = PackedHasMins(kScheme) ? kM * kSumsPerRow<kScheme, kM> : 1;
  TESSERA_SHARED(float, xs, kXsFloats);
  TESSERA_SHARED(float, sums, kSumFloats);
  const int lane = threadIdx.x % 32;
  const int row0 = blockIdx.x * kPackedSmallMRowsPerBlock + threadIdx.x / 32 * kR;
  const int spans = (w.k + kSpan<kScheme> - 1) / kSpan<kScheme>;
  float acc[kR][kM] = {};
  // kDepth steps in flight ahead of the one being decoded (issued before the first X staging):
  // at m <= 2 the whole of a 4096-input row.
  constexpr int kDepth = kM <= 2 ? 4 : 2;
  const int first = lane * kLaneInputs<kScheme>;
  Step<kScheme> ahead[kDepth];
  TESSERA_UNROLL
  for (int d = 0; d < kDepth; ++d)
    ahead[d] = LoadStep<kScheme>(w, row0, first + d * kSpan<kScheme>);
  for (int s = 0; s < spans; ++s) {  // block-uniform
    if (s % kSpansPerChunk == 0) {
      const int k0 = s * kSpan<kScheme>;
      const int chunk = w.k - k0 < kChunk<kScheme, kM> ? w.k - k0 : kChunk<kScheme, kM>;
      __syncthreads();  // the previous chunk is no longer read
      StageX<T, kScheme, kM>(x, m, w.k, k0, chunk, xs, sums);
      __syncthreads();
    }
    const Step<kScheme> step = ahead[0];
    TESSERA_UNROLL
    for (int d = 0; d + 1 < kDepth; ++d) ahead[d] = ahead[d + 1];
    ahead[kDepth - 1] = LoadStep<kScheme>(w, row0, first + (s + kDepth) * kSpan<kScheme>);
    const int e = first + s * kSpan<kScheme>;
    if (row0 < w.n && e < w.k) {
      AccumulateStep<kScheme, kM>(step, e - s / kSpansPerChunk * kChunk<kScheme, kM>, xs, sums,
                                  acc);
    }
  }
  TESSERA_UNROLL
  for (int r = 0; r < kR; ++r) {
    TESSERA_UNROLL
    for (int mm = 0; mm < kM; ++mm) {
      float total = WarpSum(acc[r][mm]);
      if constexpr (kScheme == PackedScheme::kNvfp4) total *= w.tensor_scale;
      if (lane == 0 && mm < m && row0 < w.n) y[int64_t{mm} * w.n + row0 + r] = FromFloat<T>(total);
    }
  }
}

}  // namespace tessera::cuda
