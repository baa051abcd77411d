// Batch-invariant GEMM: C[m, n] = A[m, k] · B[n, k]ᵀ (row-major, packed; B is a weight matrix
// with one row per output feature, as nn.Linear stores it). A: TA, B: TB, C: TC (bf16 / f16 /
// f32); f32 accumulation, one rounding to TC. LaunchBatchInvariantGemm picks the path from the
// types and k alone (never from m), so one weight always takes the same path:
//   - 16-bit A and B with k % 8 == 0: tensor cores (batch_invariant_gemm_tc.cuh, its own
//     invariance argument: one mma chain per element over the k16 steps in order);
//   - everything else (f32, odd depths): the CUDA-core chain below.
//
// CUDA-core chain. Invariance (DESIGN.md §6): every output element is accumulated by ONE
// thread, from 0, as
//   acc = __fmaf_rn(A[i][0], B[j][0], acc); acc = __fmaf_rn(A[i][1], B[j][1], acc); ... to k - 1
// (f32 fused multiply-add in k order, no split-K, no tree reduction), then rounded once. That
// order depends on nothing but k: not on m or n, not on the tile the element falls in, not on
// the schedule. So a request's logits are bit-identical whether it is batched with others or
// alone, at any row of the batch, and equal to the host loop with std::fma (the test asserts it).
//
// Design. A block of kGemmThreads = 256 threads (16 x 16) computes a kGemmTileM x kGemmTileN =
// 64 x 64 tile of C, 4 x 4 elements per thread (rows ty + 16 i, columns tx + 16 j: each warp
// reads 2 distinct A values (broadcast) and 16 consecutive B values per step, no bank
// conflicts). Per step of kGemmTileK = 16: A and B tiles are loaded (coalesced along k), converted
// to f32 and stored k-major in shared memory; then 16 k-steps of 16 FMAs from 8 shared loads.
// Out-of-range rows/columns load zeros and are not stored; the k loop stops at k (no padded
// terms enter the sum). Grid: ceil(n / 64) x ceil(m / 64).
//
// Bound (H100). The f32 dtype's path (and odd depths): for m >= 64 it is compute bound on CUDA
// cores (FP32 FMA peak 67 TFLOP/s; 2 shared loads per 4 FMAs and the scalar global loads hold it
// to roughly 20-30% of that), for decode (m <= 16) it is memory bound on reading B once per
// 64-row tile of A: n x k x sizeof(TB) ÷ 3.35 TB/s, but a 64-column grid under-fills 132 SMs for
// n < 8448.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/batch_invariant_gemm_tc.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kGemmThreads = 256;  // 16 x 16
inline constexpr int kGemmTileM = 64;
inline constexpr int kGemmTileN = 64;
inline constexpr int kGemmTileK = 16;
inline constexpr int kGemmPerThread = 4;  // rows (and columns) per thread

namespace gemm_detail {

// Stages rows [row0, row0 + 64) x k [k0, k0 + kGemmTileK) of `matrix` ([rows, k]) as f32 into
// tile[kk][r] (k-major, stride kGemmTileM + 4); zeros outside the matrix.
template <typename T>
__device__ __forceinline__ void LoadTile(const T* __restrict__ matrix, int rows, int k, int row0,
                                         int k0, float* tile) {
  for (int i = threadIdx.x; i < kGemmTileM * kGemmTileK; i += blockDim.x) {
    const int r = i / kGemmTileK, kk = i % kGemmTileK;
    const int row = row0 + r, col = k0 + kk;
    tile[kk * (kGemmTileM + 4) + r] =
        row < rows && col < k ? ToFloat(matrix[int64_t{row} * k + col]) : 0.0f;
  }
}

}  // namespace gemm_detail

template <typename TA, typename TB, typename TC>
__global__ void __launch_bounds__(kGemmThreads)
    BatchInvariantGemmKernel(const TA* __restrict__ a, const TB* __restrict__ b,
                             TC* __restrict__ c, int m, int n, int k) {
  static_assert(kGemmTileM == kGemmTileN && kGemmTileM == 16 * kGemmPerThread);
  constexpr int kStride = kGemmTileM + 4;
  TESSERA_SHARED(float, a_tile, kGemmTileK * kStride);
  TESSERA_SHARED(float, b_tile, kGemmTileK * kStride);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * kGemmTileM, col0 = blockIdx.x * kGemmTileN;
  float acc[kGemmPerThread][kGemmPerThread] = {};
  for (int k0 = 0; k0 < k; k0 += kGemmTileK) {
    __syncthreads();  // the previous tiles are no longer read
    gemm_detail::LoadTile(a, m, k, row0, k0, a_tile);
    gemm_detail::LoadTile(b, n, k, col0, k0, b_tile);
    __syncthreads();
    const int steps = k - k0 < kGemmTileK ? k - k0 : kGemmTileK;  // block-uniform
    for (int kk = 0; kk < steps; ++kk) {
      float a_values[kGemmPerThread], b_values[kGemmPerThread];
      TESSERA_UNROLL
      for (int i = 0; i < kGemmPerThread; ++i) {
        a_values[i] = a_tile[kk * kStride + ty + 16 * i];
        b_values[i] = b_tile[kk * kStride + tx + 16 * i];
      }
      TESSERA_UNROLL
      for (int i = 0; i < kGemmPerThread; ++i) {
        TESSERA_UNROLL
        for (int j = 0; j < kGemmPerThread; ++j) {
          acc[i][j] = __fmaf_rn(a_values[i], b_values[j], acc[i][j]);
        }
      }
    }
  }
  TESSERA_UNROLL
  for (int i = 0; i < kGemmPerThread; ++i) {
    const int row = row0 + ty + 16 * i;
    TESSERA_UNROLL
    for (int j = 0; j < kGemmPerThread; ++j) {
      const int col = col0 + tx + 16 * j;
      if (row < m && col < n) c[int64_t{row} * n + col] = FromFloat<TC>(acc[i][j]);
    }
  }
}

// Preconditions: a [m, k], b [n, k], c [m, n], packed row-major; c overlaps neither input;
// m, n >= 0, k >= 0 (k == 0 writes zeros); m / 64 < 65536 (grid.y); on the tensor-core path
// (InvariantTcTakes) a and b 16-byte aligned, else the launcher's invalid-configuration error.
template <class Launcher, typename TA, typename TB, typename TC>
auto LaunchBatchInvariantGemm(Launcher& launcher, const TA* a, const TB* b, TC* c, int m, int n,
                              int k) {
  if constexpr (std::is_same_v<TA, TB> && InvariantTcTakes<TA>(8)) {
    if (InvariantTcTakes<TA>(k) && m > 0 && n > 0) {
      if (!Aligned16(a) || !Aligned16(b)) {  // rejected: an empty grid
        return launcher.Launch(LaunchShape{dim3(0), dim3(InvariantTcNarrow::kThreads), 0},
                               BatchInvariantGemmTcKernel<InvariantTcNarrow, TA, TC>, a, b, c, m,
                               n, k);
      }
      if (m <= kInvariantTcNarrowMaxM) {
        return LaunchBatchInvariantGemmTc<InvariantTcNarrow>(launcher, a, b, c, m, n, k);
      }
      return LaunchBatchInvariantGemmTc<InvariantTcWide>(launcher, a, b, c, m, n, k);
    }
  }
  const LaunchShape shape{dim3(CeilDiv(n > 0 ? n : 1, kGemmTileN),
                               CeilDiv(m > 0 ? m : 1, kGemmTileM)),
                          dim3(kGemmThreads), 0};
  return launcher.Launch(shape, BatchInvariantGemmKernel<TA, TB, TC>, a, b, c, m, n, k);
}

}  // namespace tessera::cuda
