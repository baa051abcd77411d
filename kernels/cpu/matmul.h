// Dense matmul with weights in GGUF layout: y[m, n] = x[m, k] · w[n, k]ᵀ.
//
// Batch invariance (DESIGN.md §6) is part of the contract: y[i, j] is a function of x[i, :] and
// w[j, :] only — the same bits whatever m, i, the thread count or the tiling. Every output element
// is reduced the same way: 16 lane accumulators, lane l summing x[kk + l] * w[kk + l] for kk =
// 0, 16, 32, ... in order (one fused multiply-add per step; a zero-padded partial step at the end
// when k % 16 != 0), then the lanes added in the fixed tree
//   (((l0+l8)+(l4+l12)) + ((l2+l10)+(l6+l14))) + (((l1+l9)+(l5+l13)) + ((l3+l11)+(l7+l15)))
// (ReduceAdd in simd_scalar.h). kScalar uses unfused multiply-adds (isa.h).
//
// Quantized weights (Q8_0, Q4_0, Q4_1, MXFP4, NVFP4) stay in their GGUF blocks: for m <= 2 each
// 32-element chunk (a block; half a 64-element NVFP4 block) is dequantized in registers, for
// larger m each 16-row panel is dequantized once into f32 scratch and reused for all m rows (for
// m <= 16, four weight rows at a time, so that the f32 rows and x stay in L1 together). Dequantization is exact (quant.h), so either way Matmul on quantized
// weights is bit-identical to Matmul on the same weights dequantized to f32 at load — the weight
// format is purely a speed/memory choice. Activations stay f32 (no activation quantization).
//
// Parallelized over n (output features) in 16-row panels with the pool's static ranges.
// Buffers should be 64-byte aligned (aligned_buffer.h); any alignment is correct.
// Threading: the caller's thread drives `pool` (see thread_pool.h); x, w, y are only read/written.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/weight_format.h"

namespace tessera::kernels::cpu {

// Rows of w handled as one unit (dequantization panel, partition granule).
inline constexpr int kMatmulPanelRows = 16;

// True for the weight formats Matmul accepts: kF32, kQ8_0, kQ4_0, kQ4_1, kMxfp4, kNvfp4.
bool MatmulSupportsFormat(WeightFormat format);

// y[m, n] = x[m, k] · w[n, k]ᵀ, with n = w.rows, k = w.cols.
// Preconditions: MatmulSupportsFormat(w.format); m >= 0; x.size() >= m * k; y.size() >= m * n;
// x and y do not overlap; IsaSupported(isa).
void Matmul(ThreadPool& pool, std::span<const float> x, int64_t m, const WeightView& w,
            std::span<float> y, Isa isa = BestIsa());

// One product of MatmulSameInput: y[m, w.rows] = x · wᵀ.
struct MatmulOutput {
  WeightView w;
  std::span<float> y;
};

inline constexpr int kMaxMatmulOutputs = 4;

// Several matmuls of one x (q, k and v; gate and up) in a single parallel region over all their
// panels: one fork/join instead of one per matrix. Each y gets the same bits as its own Matmul.
// Preconditions: as Matmul for every output; all w.cols equal; 1 <= outputs.size() <=
// kMaxMatmulOutputs; no y overlaps x or another y.
void MatmulSameInput(ThreadPool& pool, std::span<const float> x, int64_t m,
                     std::span<const MatmulOutput> outputs, Isa isa = BestIsa());

// One product of MatmulMany: y[m, w.rows] = x[m, w.cols] · wᵀ.
struct MatmulProblem {
  std::span<const float> x;
  int64_t m = 0;
  WeightView w;
  std::span<float> y;
};

// Independent matmuls, each with its own x, m, w and k, in a single parallel region over all
// their panels: a mixture-of-experts layer runs every expert's projection over its own group of
// rows with one fork/join instead of one per expert (moe_ffn.h). Each y gets the same bits as its
// own Matmul. Problems with m == 0 cost nothing. Allocates nothing.
// Preconditions: as Matmul for every problem; no y overlaps any x or another y.
void MatmulMany(ThreadPool& pool, std::span<const MatmulProblem> problems, Isa isa = BestIsa());

}  // namespace tessera::kernels::cpu
