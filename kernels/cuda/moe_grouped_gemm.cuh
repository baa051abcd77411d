// Mixture-of-experts expert projections over the rows grouped by expert (moe_routing.cuh), the
// SwiGLU between them, and the combine back to tokens: the device half of
// kernels/cpu/moe_ffn.h's layer (steps 3-7; the router and the dense shared expert use the
// ordinary GEMM path).
//
// Grouped GEMM. For every grouped row `row` in expert e's group (rows [offsets[e],
// offsets[e + 1])):
//   C[row, j] = Σ_i A[a_row(row), i] · W[e, j, i]      a_row(row) = row_tokens[row] (gather
//   fused into the A read) or row itself when row_tokens is null (inputs already grouped)
// A: [*, cols] of T; W: an ExpertStack (moe_expert_weights.cuh): [E, rows_out, cols] of T (the
// GGUF expert layout dequantized at load), or a packed stack decoded exactly to f32 in the tile
// and its expert's scale s_e applied to each product; C: [n * k, rows_out] of TC (T or f32).
// T: bf16, f16 or f32.
// Invariance (DESIGN.md §6; dense 16-bit stacks at cols % 8 == 0 take tensor cores instead,
// MoeGroupedGemmTcKernel below, invariant the same way with the mma chain's bits): every C
// element is ONE thread's f32 chain
//   acc = __fmaf_rn(A[r][0], W[e][j][0], acc); ... in i order from 0, (packed: acc · s_e, one
//   rounding), one rounding to TC
// (as batch_invariant_gemm.cuh), so a row's bits depend on its own input row and its expert only:
// not on the group size, the other rows, its tile or the batch. One launch covers all experts:
// grid (ceil(rows_out / 128), MoeMaxRowTiles(n * k, E)); block y takes the tile list entry y
// (expert, first row) written by the grouping, -1 entries exit at once. A block (256 threads,
// 8 warps) computes 8 rows x 128 columns: warp w owns row w of the tile (its A value is a
// shared-memory broadcast), lane l columns l + 32 c (c < 4, conflict-free); per k step of 16 the
// A rows (gathered) and the expert's W tile are staged in shared memory as f32, k-major. A warp
// whose row is past its group's end skips the FMAs.
//
// Combine (moe_ffn.h step 7, the same operations in the same order):
//   out[t] = w[t, 0] · y[slot_rows[t k]]; out[t] += w[t, r] · y[slot_rows[t k + r]], r = 1..k-1;
//   out[t] += g[t] · shared[t], g = 1 / (1 + exp(-shared_gate_logit[t])) (1 without a gate
//   logit; no term without a shared expert). f32, every product rounded before its add
//   (__fmul_rn: never fused), one rounding to T. exp is expf: libm's under the emulator (the
//   CPU's bits), CUDA's expf (<= 2 ulp) on a GPU.
//
// Bound (H100). Decode: memory bound on the used experts' weights, each read once per 128
// columns: bytes = (distinct experts of the step) x 3 x ffn x hidden x sizeof(T) ÷ 3.35 TB/s
// (Qwen3.5-MoE, 8 of 256 experts, hidden 2048, ffn 512, bf16: 8 x 6 MiB = 50 MB, ~15 µs per
// layer for one token; a batch touching all 256 experts reads 1.6 GB, ~0.5 ms). But rows_out /
// 128 x (tiles) blocks per projection (4 x 8 = 32 blocks for one token) under-fill 132 SMs and
// each block runs one 2048-long dependent FMA chain per lane, so expect ~2-4x the memory bound
// at batch 1. Prefill: compute on CUDA cores, the shared-memory loads (5 per 4 FMAs) hold it
// near a quarter of the FP32 peak (~15 TFLOP/s) for FLOPs = 2 x n k x 3 x ffn x hidden. A
// tensor-core version keeps the invariance only with a fixed k order per element
// (batch_invariant_gemm.cuh's note).
#pragma once

#include <cstdint>

#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/batch_invariant_gemm_tc.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/launch_status.h"
#include "kernels/cuda/moe_expert_weights.cuh"
#include "kernels/cuda/moe_routing.cuh"

namespace tessera::cuda {

inline constexpr int kMoeGemmThreads = 256;  // 8 warps: one tile row each
inline constexpr int kMoeGemmTileN = 128;
inline constexpr int kMoeGemmTileK = 16;
inline constexpr int kMoeGemmColsPerLane = kMoeGemmTileN / 32;
inline constexpr int kMoeCombineThreads = 256;

// The grouping a grouped GEMM reads (device pointers from MoeGroupsView).
struct MoeGemmGroups {
  const int32_t* offsets = nullptr;      // [E + 1]
  const int32_t* row_tokens = nullptr;   // [n * k]; null: A rows are already the grouped rows
  const int32_t* tile_expert = nullptr;  // [MoeMaxRowTiles]
  const int32_t* tile_row0 = nullptr;
};

namespace moe_gemm_detail {

// a_tile[kk][r] = A[a_row(row0 + r)][k0 + kk] as f32 (zeros past the group or k).
template <typename T>
__device__ __forceinline__ void LoadRows(const T* a, const int32_t* row_tokens, int row0,
                                         int row_end, int cols, int k0, float* a_tile) {
  for (int i = threadIdx.x; i < kMoeTileRows * kMoeGemmTileK; i += blockDim.x) {
    const int r = i / kMoeGemmTileK, kk = i % kMoeGemmTileK;
    const int row = row0 + r, col = k0 + kk;
    float value = 0.0f;
    if (row < row_end && col < cols) {
      const int64_t a_row = row_tokens != nullptr ? __ldg(&row_tokens[row]) : row;
      value = ToFloat(a[a_row * cols + col]);
    }
    a_tile[kk * kMoeTileRows + r] = value;
  }
}

// w_tile[kk][j] = W_e[col0 + j][k0 + kk] as f32 (stride kMoeGemmTileN + 4; zeros outside).
template <typename Source>
__device__ __forceinline__ void LoadWeights(const Source& w, int expert, int rows_out, int cols,
                                            int col0, int k0, float* w_tile) {
  for (int i = threadIdx.x; i < kMoeGemmTileN * kMoeGemmTileK; i += blockDim.x) {
    const int j = i / kMoeGemmTileK, kk = i % kMoeGemmTileK;
    const int out_row = col0 + j, col = k0 + kk;
    w_tile[kk * (kMoeGemmTileN + 4) + j] =
        out_row < rows_out && col < cols ? w.Load(expert, out_row, col) : 0.0f;
  }
}

}  // namespace moe_gemm_detail

// At least 4 blocks an SM (64 registers a thread): without the floor ptxas for sm_100a picks 32
// registers for the Q4_K decode and spills.
template <typename T, typename TC, typename Source>
__global__ void __launch_bounds__(kMoeGemmThreads, 4)
    MoeGroupedGemmKernel(const T* __restrict__ a, Source w, TC* __restrict__ c,
                         MoeGemmGroups groups, int rows_out, int cols) {
  constexpr int kStride = kMoeGemmTileN + 4;
  TESSERA_SHARED(float, a_tile, kMoeGemmTileK * kMoeTileRows);
  TESSERA_SHARED(float, w_tile, kMoeGemmTileK * kStride);
  const int expert = __ldg(&groups.tile_expert[blockIdx.y]);
  if (expert < 0) return;  // block-uniform: past the last tile
  const int row0 = __ldg(&groups.tile_row0[blockIdx.y]);
  const int group_end = __ldg(&groups.offsets[expert + 1]);
  const int row_end = row0 + kMoeTileRows < group_end ? row0 + kMoeTileRows : group_end;
  const int col0 = blockIdx.x * kMoeGemmTileN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool row_used = row0 + warp < row_end;  // warp-uniform
  float acc[kMoeGemmColsPerLane] = {};
  for (int k0 = 0; k0 < cols; k0 += kMoeGemmTileK) {
    __syncthreads();  // the previous tiles are no longer read
    moe_gemm_detail::LoadRows(a, groups.row_tokens, row0, row_end, cols, k0, a_tile);
    moe_gemm_detail::LoadWeights(w, expert, rows_out, cols, col0, k0, w_tile);
    __syncthreads();
    if (!row_used) continue;
    const int steps = cols - k0 < kMoeGemmTileK ? cols - k0 : kMoeGemmTileK;
    for (int kk = 0; kk < steps; ++kk) {
      const float a_value = a_tile[kk * kMoeTileRows + warp];
      TESSERA_UNROLL
      for (int j = 0; j < kMoeGemmColsPerLane; ++j) {
        acc[j] = __fmaf_rn(a_value, w_tile[kk * kStride + lane + 32 * j], acc[j]);
      }
    }
  }
  if (!row_used) return;
  float scale = 1.0f;
  if constexpr (Source::kScaled) scale = w.OutputScale(expert);
  TESSERA_UNROLL
  for (int j = 0; j < kMoeGemmColsPerLane; ++j) {
    const int col = col0 + lane + 32 * j;
    float value = acc[j];
    if constexpr (Source::kScaled) value = __fmul_rn(value, scale);
    if (col < rows_out) c[int64_t{row0 + warp} * rows_out + col] = FromFloat<TC>(value);
  }
}

// Dense bf16 / f16 stacks whose cols are a multiple of 8 run on tensor cores: the batch-
// invariant GEMM's narrow tile (batch_invariant_gemm_tc.cuh: 16 x 32 per block, 128-input k
// tiles through 3 cp.async stages) over one tile entry's rows (kMoeTileRows of the 16 used) and
// its expert's matrix. Each element is the same k16-ordered mma chain as there, so a row's bits
// depend on its input row and its expert only (the invariance above, with the mma chain's bits
// instead of the FMA chain's). Decode: memory bound on the used experts' weights, each read once
// per row tile with two stages in flight per block (design; not measured).
template <typename T>
struct MoeTileOperands {
  const T* a;
  const int32_t* row_tokens;  // null: A rows are the grouped rows
  int row0, row_end, cols;
  const T* w;  // the expert's matrix [rows_out, cols] (rows expert_rows apart from the next's)
  int rows_out, col0;
  __device__ __forceinline__ const T* ARow(int r) const {
    const int row = row0 + r < row_end ? row0 + r : row_end - 1;
    const int64_t a_row = row_tokens != nullptr ? __ldg(&row_tokens[row]) : row;
    return a + a_row * cols;
  }
  __device__ __forceinline__ const T* BRow(int j) const {
    return w + int64_t{col0 + j < rows_out ? col0 + j : rows_out - 1} * cols;
  }
};

// Grid (ceil(rows_out / InvariantTcNarrow::kCols), tiles), InvariantTcNarrow::kThreads threads.
template <typename T, typename TC>
__global__ void __launch_bounds__(InvariantTcNarrow::kThreads)
    MoeGroupedGemmTcKernel(const T* __restrict__ a, const T* __restrict__ w, int expert_rows,
                           TC* __restrict__ c, MoeGemmGroups groups, int rows_out, int cols) {
  using Tile = InvariantTcNarrow;
  static_assert(kMoeTileRows <= Tile::kRows);
  TESSERA_SHARED(T, stages, Tile::kStages * Tile::kStageElements);
  const int expert = __ldg(&groups.tile_expert[blockIdx.y]);
  if (expert < 0) return;  // block-uniform: past the last tile
  const int row0 = __ldg(&groups.tile_row0[blockIdx.y]);
  const int group_end = __ldg(&groups.offsets[expert + 1]);
  const int row_end = row0 + kMoeTileRows < group_end ? row0 + kMoeTileRows : group_end;
  const int col0 = blockIdx.x * Tile::kCols;
  const MoeTileOperands<T> ops{a,    groups.row_tokens, row0,          row_end, cols,
                               w + int64_t{expert} * expert_rows * cols, rows_out, col0};
  float acc[Tile::kMmaM][Tile::kMmaN][4] = {};
  invariant_tc::RunTile<Tile>(ops, cols, stages, acc);
  invariant_tc::StoreTile<Tile>(acc, row_end, rows_out, row0, col0, c);
}

// One thread per (token, hidden element); grid (tokens, chunks of hidden).
template <typename TY, typename T>
__global__ void __launch_bounds__(kMoeCombineThreads)
    MoeCombineKernel(const TY* __restrict__ y, const float* __restrict__ weights,
                     const int32_t* __restrict__ slot_rows, const T* __restrict__ shared,
                     const float* __restrict__ shared_gate_logits, T* __restrict__ out, int k,
                     int hidden) {
  const int i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= hidden) return;
  const int64_t token = blockIdx.x;
  const float* w = weights + token * k;
  const int32_t* rows = slot_rows + token * k;
  float o = __fmul_rn(w[0], ToFloat(y[int64_t{__ldg(&rows[0])} * hidden + i]));
  for (int r = 1; r < k; ++r) {
    o = o + __fmul_rn(w[r], ToFloat(y[int64_t{__ldg(&rows[r])} * hidden + i]));
  }
  if (shared != nullptr) {
    const float gate = shared_gate_logits != nullptr
                           ? __frcp_rn(1.0f + expf(-shared_gate_logits[token]))
                           : 1.0f;
    o = o + __fmul_rn(gate, ToFloat(shared[token * hidden + i]));
  }
  out[token * hidden + i] = FromFloat<T>(o);
}

// C = the grouped projection (header comment). Preconditions: `groups` from
// LaunchMoeGroupByExpert for these num_slots = n * k and num_experts; every row_tokens entry a
// row of a; c [num_slots, rows_out] overlaps nothing; rows_out >= 1, cols >= 0 (0: zeros);
// ExpertStackError(w) null (else the launcher's invalid-configuration error, an empty grid). A
// dense w.expert_rows (0 = rows_out) is the rows from one expert's matrix to the next's: a view
// of part of each matrix (the gate or up half of a fused gate_up stack, w.dense pointing at its
// first row). A dense bf16 / f16 stack with cols % 8 == 0 takes the tensor cores
// (MoeGroupedGemmTcKernel): a and w.dense 16-byte aligned, else the invalid-configuration error.
template <class Launcher, typename T, typename TC>
auto LaunchMoeGroupedGemm(Launcher& launcher, const T* a, const ExpertStack<T>& w, TC* c,
                          const MoeGemmGroups& groups, int num_slots, int num_experts,
                          int rows_out, int cols) {
  const int tiles = MoeMaxRowTiles(num_slots, num_experts);
  const bool valid = ExpertStackError(w, num_experts, rows_out, cols) == nullptr;
  const LaunchShape shape{dim3(valid ? CeilDiv(rows_out, kMoeGemmTileN) : 0, tiles > 0 ? tiles : 1),
                          dim3(kMoeGemmThreads), 0};
  if constexpr (InvariantTcTakes<T>(8)) {
    if (!w.packed && InvariantTcTakes<T>(cols)) {  // tensor cores (see MoeGroupedGemmTcKernel)
      using Tile = InvariantTcNarrow;
      const bool aligned = Aligned16(a) && Aligned16(w.dense);
      const LaunchShape tc{dim3(valid && aligned ? CeilDiv(rows_out, Tile::kCols) : 0,
                                tiles > 0 ? tiles : 1),
                           dim3(Tile::kThreads), 0};
      return launcher.Launch(tc, MoeGroupedGemmTcKernel<T, TC>, a, w.dense,
                             w.expert_rows > 0 ? w.expert_rows : rows_out, c, groups, rows_out,
                             cols);
    }
  }
  if (!w.packed) {
    const moe_weights::DenseSource<T> source{w.dense, cols,
                                             w.expert_rows > 0 ? w.expert_rows : rows_out};
    return launcher.Launch(shape, MoeGroupedGemmKernel<T, TC, moe_weights::DenseSource<T>>, a,
                           source, c, groups, rows_out, cols);
  }
  switch (w.packed_view.stack.scheme) {
#define TESSERA_MOE_PACKED_CASE(S)                                                           \
  case PackedScheme::S:                                                                      \
    return launcher.Launch(shape,                                                            \
                           MoeGroupedGemmKernel<T, TC, moe_weights::PackedSource<PackedScheme::S>>, \
                           a, moe_weights::PackedSource<PackedScheme::S>{w.packed_view}, c,  \
                           groups, rows_out, cols);
    TESSERA_MOE_PACKED_CASE(kQ8_0)
    TESSERA_MOE_PACKED_CASE(kQ4_0)
    TESSERA_MOE_PACKED_CASE(kQ4_1)
    TESSERA_MOE_PACKED_CASE(kQ4_K)
    TESSERA_MOE_PACKED_CASE(kNvfp4)
    TESSERA_MOE_PACKED_CASE(kMxfp4)
#undef TESSERA_MOE_PACKED_CASE
    default:
      break;
  }
  const LaunchShape empty{dim3(0), dim3(kMoeGemmThreads), 0};  // the launcher's invalid config
  using Unknown = moe_weights::PackedSource<PackedScheme::kQ8_0>;
  return launcher.Launch(empty, MoeGroupedGemmKernel<T, TC, Unknown>, a, Unknown{w.packed_view}, c,
                         groups, rows_out, cols);
}

// out [n, hidden] = the combine (header comment). y [n * k, hidden]; weights, slot_rows [n, k];
// shared [n, hidden] or null (no shared expert); shared_gate_logits [n] or null (weight 1).
// Preconditions: n >= 1, k >= 1, hidden >= 1; out overlaps no input.
template <class Launcher, typename TY, typename T>
auto LaunchMoeCombine(Launcher& launcher, const TY* y, const float* weights,
                      const int32_t* slot_rows, const T* shared, const float* shared_gate_logits,
                      T* out, int num_tokens, int k, int hidden) {
  const LaunchShape shape{dim3(num_tokens, CeilDiv(hidden, kMoeCombineThreads)),
                          dim3(kMoeCombineThreads), 0};
  return launcher.Launch(shape, MoeCombineKernel<TY, T>, y, weights, slot_rows, shared,
                         shared_gate_logits, out, k, hidden);
}

// The routed experts of one layer after the grouping (moe_ffn.h steps 3-6), four launches:
// gate and up over the gathered token rows, SwiGLU in place into `gate`, down into y.
template <typename T, typename TY>
struct MoeExpertsArgs {
  const T* x = nullptr;       // [n, hidden]
  ExpertStack<T> gate_w;      // [E, ffn, hidden] (a view of a fused gate_up stack's gate half)
  ExpertStack<T> up_w;        // [E, ffn, hidden]
  ExpertStack<T> down_w;      // [E, hidden, ffn]
  T* gate = nullptr;          // scratch [n * k, ffn]; holds SwiGLU(gate, up) after
  T* up = nullptr;            // scratch [n * k, ffn]
  TY* y = nullptr;            // [n * k, hidden], grouped row order
  int num_tokens = 0;
  int k = 0;
  int num_experts = 0;
  int hidden = 0;
  int ffn = 0;
};

// Preconditions: as LaunchMoeGroupedGemm; groups.row_tokens not null; n * k >= 1.
template <class Launcher, typename T, typename TY>
auto LaunchMoeExperts(Launcher& launcher, const MoeGemmGroups& groups,
                      const MoeExpertsArgs<T, TY>& args) {
  const int slots = args.num_tokens * args.k;
  auto status = LaunchMoeGroupedGemm(launcher, args.x, args.gate_w, args.gate, groups, slots,
                                     args.num_experts, args.ffn, args.hidden);
  if (!LaunchSucceeded(status)) return status;
  status = LaunchMoeGroupedGemm(launcher, args.x, args.up_w, args.up, groups, slots,
                                args.num_experts, args.ffn, args.hidden);
  if (!LaunchSucceeded(status)) return status;
  status = LaunchSwiGlu(launcher, static_cast<const T*>(args.gate),
                        static_cast<const T*>(args.up), args.gate, slots, args.ffn);
  if (!LaunchSucceeded(status)) return status;
  MoeGemmGroups grouped = groups;
  grouped.row_tokens = nullptr;  // the SwiGLU rows are already in group order
  return LaunchMoeGroupedGemm(launcher, static_cast<const T*>(args.gate), args.down_w, args.y,
                              grouped, slots, args.num_experts, args.hidden, args.ffn);
}

}  // namespace tessera::cuda
