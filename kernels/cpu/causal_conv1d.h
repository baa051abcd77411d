// Causal depthwise conv1d with a rolling state: the short convolution in front of the Gated
// DeltaNet rule (Qwen3-Next / Qwen3.5 linear-attention layers; HF `torch_causal_conv1d_update`
// and the conv1d of `Qwen3NextGatedDeltaNet.forward`, llama.cpp `ggml_ssm_conv` + `ggml_silu`).
//
// Channels C, kernel K >= 1 (4 in the published models), no bias (the models have none). For
// one sequence, writing in(j) for the input row at time j of this call, with j < 0 meaning the
// conv state (the K-1 inputs that came before the call):
//   y[t][c]   = Σ_{k=0}^{K-1} w[c][k] · in(t - (K-1) + k)[c]        summed in order k = 0..K-1
//   out[t][c] = silu(y[t][c]) = y / (1 + exp(-y))   when apply_silu (the models), else y
// and afterwards the state holds the last K-1 rows of [old state; x]. A new sequence starts from
// a zero state: HF pads the prefill with K-1 zero columns.
//
// Shapes:
//   weight [C, K]         GGUF `ssm_conv1d` (ne = {K, C}); HF conv1d.weight [C, 1, K] squeezed
//   x, out [rows, C]      row r at x[r * x_stride] / out[r * out_stride] (x may be a view into
//                         a wider projection output)
//   states [num_slots, K-1, C]   per-sequence state, TIME-major: row s is the input s - (K-1)
//                         steps before the next token, channels contiguous. HF and llama.cpp keep
//                         [C, K-1]; rows of channels let SIMD lanes (and CUDA threads) take
//                         consecutive channels. The layout is private to this kernel: the worker
//                         sizes, clears and snapshots the pool as opaque floats.
//
// Numerics: f32 products and sums in the fixed order above; kAvx2/kAvx512 fuse them (FMA) and
// give identical bits, kScalar rounds twice (isa.h). exp is the polynomial of simd_scalar.h.
// Every output element depends only on its own channel's window, so results are bit-identical
// whatever the batch, the thread count, or how a sequence's tokens are split across calls
// (prefill then decode == one prefill, bit for bit).
// Threading: parallel over channel blocks on `pool`; stateless otherwise.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/recurrent_sequence.h"
#include "kernels/cpu/thread_pool.h"

namespace tessera::kernels::cpu {

struct CausalConvParams {
  int64_t channels = 0;  // C > 0
  int kernel_size = 0;   // K >= 1
  bool apply_silu = true;
};

// Floats of one sequence's conv state: (K-1) * C.
inline int64_t ConvStateElements(const CausalConvParams& p) {
  return static_cast<int64_t>(p.kernel_size - 1) * p.channels;
}

// Runs every sequence's rows through the convolution and advances its state slot: a prefill is
// a sequence with num_tokens = T, a decode step is many sequences with num_tokens = 1, and a
// mixed step is both in one call.
// Preconditions: params valid; weight.size() >= C * K; sequences back to back from row 0 with
// distinct slots in [0, num_slots) where num_slots = states.size() / ConvStateElements (any
// slot count when K = 1); x_stride, out_stride >= C; x and out cover the rows; out does not
// overlap x or states (the window of token t reads rows t-K+1..t of x).
void CausalConv1d(ThreadPool& pool, const CausalConvParams& params, std::span<const float> weight,
                  std::span<const float> x, int64_t x_stride,
                  std::span<const RecurrentSequence> sequences, std::span<float> states,
                  std::span<float> out, int64_t out_stride, Isa isa = BestIsa());

}  // namespace tessera::kernels::cpu
