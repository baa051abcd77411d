// Mixture-of-experts feed-forward layer (Qwen3-Next / Qwen3.5-MoE), grouped by expert:
//
//   out[t] = Σ_r w[t, r] · Down_e(SiLU(Gate_e x[t]) ⊙ Up_e x[t])      e = the rank-r expert of t
//          + sigmoid(shared_expert_gate · x[t]) · SharedDown(SiLU(SharedGate x[t]) ⊙ SharedUp x[t])
//
// with routing as moe_routing.h. Per pass over at most `max_tokens_per_pass` tokens:
//   1. one parallel region: router logits, the shared expert's gate logit, its gate and up;
//   2. routing (softmax, top-k, weights), parallel over tokens; grouping by expert (counting sort);
//   3. gather: each expert's rows into a contiguous block [rows of group e, hidden];
//   4. one parallel region (MatmulMany): gate and up of every expert that has rows, each ONE
//      matmul over its whole group, never one per token;
//   5. SwiGLU over all rows (routed and shared);
//   6. one parallel region: down of every expert over its group, and the shared expert's down;
//   7. combine, parallel over tokens: out[t] = w[t, 0] · y0, then + w[t, r] · y_r for r = 1..k-1
//      in rank order, then + g[t] · shared[t] (f32, a multiply then an add, never fused).
//
// Batch invariance (DESIGN.md §6), bit for bit: Matmul's rows do not depend on the other rows,
// their count or the threads (matmul.h), SwiGLU is elementwise, routing is per token, and step 7
// adds a token's terms in an order fixed by the token alone. So token t's output is the same bits
// whatever else is in the batch, its position, the pass size and the thread count. Quantized
// expert weights give the bits of the same weights dequantized to f32 (matmul.h).
//
// Threading: the caller's thread drives `pool`; the workspace is used by one call at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/weight_format.h"

namespace tessera::kernels::cpu {

// num_experts matrices [rows, cols] in one format, back to back: a GGUF 3-D expert tensor
// (ffn_gate_exps etc., GGUF dims [cols, rows, num_experts]). Non-owning, like WeightView.
// A part of each expert's matrix can be viewed: llama.cpp's fused `ffn_gate_up_exps`
// [num_experts, 2 * ffn, hidden] holds each expert's gate rows then its up rows, so its gate is
// {rows = ffn, expert_rows = 2 * ffn, first_row = 0} and its up {..., first_row = ffn}.
struct ExpertWeightsView {
  WeightFormat format = WeightFormat::kF32;
  const void* data = nullptr;
  int64_t num_experts = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t expert_rows = 0;  // rows from one expert's matrix to the next's; 0 = rows
  int64_t first_row = 0;    // the view's first row within each expert's matrix
  // [num_experts]: expert e's products are multiplied by output_scales[e] (an NVFP4 stack's
  // per-expert tensor scales, docs/design/fp4-formats.md); null: 1.
  const float* output_scales = nullptr;

  // Expert e's matrix [rows, cols]. Precondition: 0 <= e < num_experts.
  WeightView Expert(int64_t e) const;
};

// One MoE layer's weights, with llama.cpp's tensor names.
struct MoeFfnWeights {
  WeightView router;       // ffn_gate_inp [num_experts, hidden]
  ExpertWeightsView gate;  // ffn_gate_exps [num_experts, expert_ffn, hidden]
  ExpertWeightsView up;    // ffn_up_exps [num_experts, expert_ffn, hidden]
  ExpertWeightsView down;  // ffn_down_exps [num_experts, hidden, expert_ffn]
  // The shared expert: all three null (data == nullptr) for a model without one.
  WeightView shared_gate;  // ffn_gate_shexp [shared_ffn, hidden]
  WeightView shared_up;    // ffn_up_shexp [shared_ffn, hidden]
  WeightView shared_down;  // ffn_down_shexp [hidden, shared_ffn]
  // ffn_gate_inp_shexp [1, hidden]; null: the shared expert is added with weight 1.
  WeightView shared_expert_gate;

  // What each plain matrix's products are multiplied by (an NVFP4 tensor scale; 1 otherwise).
  struct OutputScales {
    float router = 1.0f;
    float shared_gate = 1.0f;
    float shared_up = 1.0f;
    float shared_down = 1.0f;
    float shared_expert_gate = 1.0f;
  } scales;

  bool has_shared_expert() const { return shared_gate.data != nullptr; }
  bool has_shared_expert_gate() const { return shared_expert_gate.data != nullptr; }
};

struct MoeFfnConfig {
  MoeRoutingConfig routing;
  // Tokens per pass: bounds the workspace (about num_experts_used * (2 * hidden + 2 * expert_ffn)
  // floats per token). Larger passes give each expert more rows per read of its weights. Results
  // do not depend on it.
  int64_t max_tokens_per_pass = 256;
};

// Scratch of MoeFfn, grow-only: after the first pass of the largest size, calls do not allocate.
struct MoeFfnWorkspace {
  AlignedVector<float> logits;        // [n, num_experts], softmaxed in place
  AlignedVector<float> shared_logit;  // [n]
  std::vector<int32_t> expert_ids;    // [n, k]
  std::vector<float> weights;         // [n, k]
  ExpertGroups groups;
  AlignedVector<float> rows_in;      // [n * k, hidden] x gathered in group order
  AlignedVector<float> rows_gate;    // [n * k, expert_ffn], then SwiGLU in place
  AlignedVector<float> rows_up;      // [n * k, expert_ffn]
  AlignedVector<float> rows_out;     // [n * k, hidden] each expert's down output
  AlignedVector<float> shared_gate;  // [n, shared_ffn], then SwiGLU in place
  AlignedVector<float> shared_up;    // [n, shared_ffn]
  AlignedVector<float> shared_out;   // [n, hidden]
  std::vector<MatmulProblem> problems;
};

// Checks every shape against config and hidden (the router's cols): expert counts, rows and
// cols consistent, formats MatmulSupportsFormat. Aborts naming the mismatch (a loader must have
// validated the file before; DESIGN.md §8).
void CheckMoeFfnWeights(const MoeFfnConfig& config, const MoeFfnWeights& weights);

// out[num_tokens, hidden] = the MoE layer of x[num_tokens, hidden] (header comment).
// Preconditions: CheckMoeFfnWeights; max_tokens_per_pass >= 1; x.size() and out.size() >=
// num_tokens * hidden; x and out do not overlap; every router logits row has a finite max.
void MoeFfn(ThreadPool& pool, const MoeFfnConfig& config, const MoeFfnWeights& weights,
            std::span<const float> x, int64_t num_tokens, MoeFfnWorkspace* workspace,
            std::span<float> out, Isa isa = BestIsa());

}  // namespace tessera::kernels::cpu
