// Batch-invariant GEMM on tensor cores: C[m, n] = A[m, k] · B[n, k]ᵀ for 16-bit A and B (bf16 or
// f16, row-major, packed; B one row per output feature as nn.Linear stores it), f32
// accumulation, one rounding to TC (T or f32). The batch-invariant mode's GEMM for the 16-bit
// dtypes (batch_invariant_gemm.cuh dispatches; f32 and k % 8 != 0 stay on its CUDA-core chain).
//
// Invariance (DESIGN.md §6). Every output element is ONE accumulator chain of mma.sync m16n8k16
// instructions over the k16 steps [0, 16), [16, 32), ... in k order, from 0, each step adding
// the element's 16 products to the running f32 value (the last step's inputs past k are zeros;
// steps that start at or past k are never issued), then rounded once. An mma computes each
// element of D from its own row of A, its own column of B and its own C: the tensor core's
// summation order inside one instruction is fixed by the hardware and the same for every
// element. So an element's bits depend on k and its own row and column only: not on m or n,
// not on the tile or the warp that computes it, and not on the tile configuration, provided
// every configuration issues the same instruction over the same k16 steps. That is why two
// configurations may coexist (a narrow one for decode, a wide one for prefill), why there is no
// split-K or stream-K, and why the k16 steps of one configuration's k tile (32 or 128 inputs)
// are the same steps as the other's. The bits differ from the CUDA-core chain's (the mma does
// not round after each product), so one weight always takes one of the two paths: the choice
// depends on its dtype and k only.
//
// Design. Tile configurations (InvariantTcTile):
//   narrow (m <= 16): 2 warps, a 16 x 32 tile of C (each warp 16 x 16: 1 x 2 mma tiles), k tiles
//     of 128 through 3 shared-memory stages: decode reads every B row once, and 32-column tiles
//     put n / 32 blocks on the SMs (128 for n = 4096), each with 2 stages (16 KiB) in flight;
//   wide (m > 16): 4 warps, a 128 x 64 tile (each warp 64 x 32: 4 x 4 mma tiles, 64 f32
//     accumulators per lane), k tiles of 32 through 3 stages (46 KiB).
// Both stage A and B tiles by 16-byte cp.async (rows padded by 16 bytes, so ldmatrix's 8 row
// reads hit distinct banks), two tiles loading while one is computed; fragments by ldmatrix.x4
// (A: one 16 x 16 mma tile; B: two 8-column tiles, which is the col-major B of the mma because B
// is stored [n, k]). Rows past m or n are clamped to the last row (computed, never stored);
// 16-byte chunks past k are zeros.
//
// Bound (H100, design; not measured): decode (narrow) is memory bound on reading B once:
// n x k x 2 bytes ÷ 3.35 TB/s (4096 x 4096: 10 µs), if the ~16 KiB in flight per block suffices
// (Little: 132 blocks x 16 KiB at ~1 µs latency is ~2 TB/s, so expect 0.5-0.7 of the bound at
// n = 4096 and more at wider n). Prefill (wide) is an mma.sync GEMM with a 128 x 64 tile:
// 64 mma per 4 x 2 ldmatrix.x4 per k16 step per warp, about half of the dense bf16 peak at
// best (mma.sync, not wgmma; cuBLAS uses wgmma), so a 4k-token prefill's GEMMs take ~1.5-2x
// cuBLAS's time against 10-40x for the CUDA-core chain.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/ptx_ops.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace tessera::cuda {

template <int kWarpsM_, int kWarpsN_, int kMmaM_, int kMmaN_, int kTileK_, int kStages_>
struct InvariantTcTile {
  static constexpr int kWarpsM = kWarpsM_, kWarpsN = kWarpsN_;
  static constexpr int kMmaM = kMmaM_, kMmaN = kMmaN_;  // mma tiles per warp (16 rows, 8 cols)
  static constexpr int kTileK = kTileK_, kStages = kStages_;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kWarpRows = 16 * kMmaM, kWarpCols = 8 * kMmaN;
  static constexpr int kRows = kWarpsM * kWarpRows, kCols = kWarpsN * kWarpCols;
  static constexpr int kStride = kTileK + 8;  // elements per shared row (+16 bytes)
  static constexpr int kStageElements = (kRows + kCols) * kStride;
  static constexpr int kChunksPerRow = kTileK / 8;  // 16-byte chunks
  static_assert(kMmaN % 2 == 0, "B fragments load two 8-column tiles per ldmatrix.x4");
  static_assert(kTileK % 16 == 0);
};

using InvariantTcNarrow = InvariantTcTile<1, 2, 1, 2, 128, 3>;  // 16 x 32
using InvariantTcWide = InvariantTcTile<2, 2, 4, 4, 32, 3>;     // 128 x 64
inline constexpr int kInvariantTcNarrowMaxM = InvariantTcNarrow::kRows;

namespace invariant_tc {

template <typename T>
inline constexpr ptx::MmaType kMmaType =
    std::is_same_v<T, __half> ? ptx::MmaType::kF16 : ptx::MmaType::kBf16;

// The operands of one block's tile: where row r of its A tile and row j of its B tile start
// (clamped to a real row: rows past the end are computed, never stored).
template <typename T>
struct DenseTileOperands {
  const T* a;
  const T* b;
  int m, n, k, m0, n0;
  __device__ __forceinline__ const T* ARow(int r) const {
    return a + int64_t{m0 + r < m ? m0 + r : m - 1} * k;
  }
  __device__ __forceinline__ const T* BRow(int j) const {
    return b + int64_t{n0 + j < n ? n0 + j : n - 1} * k;
  }
};

// Issues the copies of the A tile's and B tile's rows x k [k0, +kTileK) into one stage (A rows
// first); chunks past k are stored as zeros.
template <class Tile, class Operands, typename T>
__device__ __forceinline__ void LoadStage(const Operands& ops, int k, int k0, T* stage) {
  constexpr int kChunks = (Tile::kRows + Tile::kCols) * Tile::kChunksPerRow;
  for (int c = threadIdx.x; c < kChunks; c += Tile::kThreads) {
    const int r = c / Tile::kChunksPerRow, col = k0 + 8 * (c % Tile::kChunksPerRow);
    T* destination = stage + r * Tile::kStride + (col - k0);
    if (col >= k) {
      *reinterpret_cast<uint4*>(destination) = uint4{0, 0, 0, 0};
      continue;
    }
    const T* row = r < Tile::kRows ? ops.ARow(r) : ops.BRow(r - Tile::kRows);
    ptx::CpAsync16(destination, row + col);
  }
}

// The k16 steps of one stage that start below k, in k order, into the warp's accumulators.
template <class Tile, typename T>
__device__ __forceinline__ void ComputeStage(const T* stage, int k0, int k,
                                             float (&acc)[Tile::kMmaM][Tile::kMmaN][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const T* a_rows = stage + (warp / Tile::kWarpsN) * Tile::kWarpRows * Tile::kStride;
  const T* b_rows =
      stage + (Tile::kRows + (warp % Tile::kWarpsN) * Tile::kWarpCols) * Tile::kStride;
  TESSERA_UNROLL
  for (int kk = 0; kk < Tile::kTileK; kk += 16) {
    if (k0 + kk >= k) break;  // block-uniform: the same steps for every configuration
    uint32_t a_frag[Tile::kMmaM][4], b_frag[Tile::kMmaN][2];
    TESSERA_UNROLL
    for (int i = 0; i < Tile::kMmaM; ++i) {
      ptx::LdMatrix<4>(a_frag[i],
                       a_rows + (16 * i + lane % 16) * Tile::kStride + kk + 8 * (lane / 16));
    }
    TESSERA_UNROLL
    for (int j = 0; j < Tile::kMmaN; j += 2) {
      uint32_t regs[4];
      ptx::LdMatrix<4>(regs, b_rows + (8 * j + lane % 8 + 8 * (lane / 16)) * Tile::kStride + kk +
                                 8 * ((lane / 8) % 2));
      b_frag[j][0] = regs[0], b_frag[j][1] = regs[1];
      b_frag[j + 1][0] = regs[2], b_frag[j + 1][1] = regs[3];
    }
    TESSERA_UNROLL
    for (int i = 0; i < Tile::kMmaM; ++i) {
      TESSERA_UNROLL
      for (int j = 0; j < Tile::kMmaN; ++j) {
        ptx::MmaM16N8K16<kMmaType<T>>(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
      }
    }
  }
}

template <class Tile, typename TC>
__device__ __forceinline__ void StoreTile(const float (&acc)[Tile::kMmaM][Tile::kMmaN][4], int m,
                                          int n, int m0, int n0, TC* c) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int row0 = m0 + (warp / Tile::kWarpsN) * Tile::kWarpRows + lane / 4;
  const int col0 = n0 + (warp % Tile::kWarpsN) * Tile::kWarpCols + 2 * (lane % 4);
  TESSERA_UNROLL
  for (int i = 0; i < Tile::kMmaM; ++i) {
    TESSERA_UNROLL
    for (int j = 0; j < Tile::kMmaN; ++j) {
      TESSERA_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int row = row0 + 16 * i + 8 * (e >> 1), col = col0 + 8 * j + (e & 1);
        if (row < m && col < n) c[int64_t{row} * n + col] = FromFloat<TC>(acc[i][j][e]);
      }
    }
  }
}

// The block's tile through the pipeline: kStages - 1 k tiles loading while one is computed.
// Preconditions: every thread of the block calls it; `stages` holds Tile::kStages stages.
template <class Tile, class Operands, typename T>
__device__ __forceinline__ void RunTile(const Operands& ops, int k, T* stages,
                                        float (&acc)[Tile::kMmaM][Tile::kMmaN][4]) {
  const int tiles = (k + Tile::kTileK - 1) / Tile::kTileK;
  for (int t = 0; t < Tile::kStages - 1; ++t) {
    if (t < tiles) LoadStage<Tile>(ops, k, t * Tile::kTileK, stages + t * Tile::kStageElements);
    ptx::CpAsyncCommit();
  }
  for (int kt = 0; kt < tiles; ++kt) {
    const int ahead = kt + Tile::kStages - 1;
    if (ahead < tiles) {  // its stage was released by the previous iteration's last barrier
      LoadStage<Tile>(ops, k, ahead * Tile::kTileK,
                      stages + (ahead % Tile::kStages) * Tile::kStageElements);
    }
    ptx::CpAsyncCommit();
    ptx::CpAsyncWait<Tile::kStages - 1>();  // this thread's copies of tile kt have landed
    __syncthreads();                        // and everyone's (and the zero stores)
    ComputeStage<Tile>(stages + (kt % Tile::kStages) * Tile::kStageElements, kt * Tile::kTileK, k,
                       acc);
    __syncthreads();  // this stage may be overwritten after this
  }
}

}  // namespace invariant_tc

// Grid (ceil(n / Tile::kCols), ceil(m / Tile::kRows)), Tile::kThreads threads; m, n >= 1.
template <class Tile, typename T, typename TC>
__global__ void __launch_bounds__(Tile::kThreads)
    BatchInvariantGemmTcKernel(const T* __restrict__ a, const T* __restrict__ b,
                               TC* __restrict__ c, int m, int n, int k) {
  using namespace invariant_tc;
  TESSERA_SHARED(T, stages, Tile::kStages * Tile::kStageElements);
  const int m0 = blockIdx.y * Tile::kRows, n0 = blockIdx.x * Tile::kCols;
  float acc[Tile::kMmaM][Tile::kMmaN][4] = {};
  RunTile<Tile>(DenseTileOperands<T>{a, b, m, n, k, m0, n0}, k, stages, acc);
  StoreTile<Tile>(acc, m, n, m0, n0, c);
}

// Whether the tensor-core path takes a T GEMM of depth k: 16-bit T and k a multiple of 8
// (16-byte rows). It depends on the weight alone (its dtype and k), never on m or a pointer, so
// one weight always gets the same bits.
template <typename T>
constexpr bool InvariantTcTakes(int k) {
  return (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) && k % 8 == 0;
}

// One configuration alone (tests compare them). Preconditions: InvariantTcTakes<T>(k), a and b
// 16-byte aligned, m, n >= 1, c overlaps neither input, m / Tile::kRows < 65536.
template <class Tile, class Launcher, typename T, typename TC>
auto LaunchBatchInvariantGemmTc(Launcher& launcher, const T* a, const T* b, TC* c, int m, int n,
                                int k) {
  const LaunchShape shape{dim3(CeilDiv(n, Tile::kCols), CeilDiv(m, Tile::kRows)),
                          dim3(Tile::kThreads), 0};
  return launcher.Launch(shape, BatchInvariantGemmTcKernel<Tile, T, TC>, a, b, c, m, n, k);
}

}  // namespace tessera::cuda
