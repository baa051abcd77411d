// Gated delta rule: the recurrence of Gated DeltaNet linear-attention layers (Qwen3-Next,
// Qwen3.5). HF: `torch_recurrent_gated_delta_rule` / `torch_chunk_gated_delta_rule` with
// use_qk_l2norm_in_kernel=True; llama.cpp: `build_delta_net_autoregressive` /
// `build_delta_net_chunking` (src/models/delta-net-base.cpp), ggml's gated_delta_net op.
//
// Per sequence and value head h (k head kh(h), see GdnHeadMapping), per token t:
//   q̂ = q_t[kh] / sqrt(Σ q_t[kh]² + eps) · q_scale      k̂ = k_t[kh] / sqrt(Σ k_t[kh]² + eps)
//   S ← exp(g_t[h]) · S                                   (g ≤ 0: log-decay)
//   u = β_t[h] · (v_t[h] − Sᵀ k̂)                          [d_v]
//   S ← S + k̂ ⊗ u                                         (S[i][j] += k̂[i] · u[j])
//   o_t[h] = Sᵀ q̂                                         [d_v]
// The L2 norm (eps 1e-6, HF/FLA `l2norm`; llama.cpp divides by max(‖x‖, eps) instead, equal to
// f32 rounding for any non-tiny vector) and the q scale (1/sqrt(d_k) in the models) are done HERE,
// in the kernel, so the caller passes the conv output as is. Set l2_normalize_qk = false and
// q_scale = 1 to run the bare rule (tests).
//
// Shapes (rows = the step's tokens; row r at data[r * stride], so q, k and v may be views into
// the conv output [rows, 2·h_k·d_k + h_v·d_v]):
//   q, k   [rows, h_k, d_k]     v [rows, h_v, d_v]     g, beta [rows, h_v] (contiguous)
//   out    [rows, h_v, d_v] (contiguous)
//   states [num_slots, h_v, d_k, d_v] f32 (HF's layout; llama.cpp stores each head transposed)
//
// Two forms of the same math, chosen per call or per sequence:
//  * Recurrent: the loop above, token by token (decode: num_tokens = 1, many sequences).
//  * Chunked (prefill): chunks of kGdnChunkSize = 64 tokens in the WY/UT form of HF's
//    torch_chunk_gated_delta_rule; a last partial chunk is processed as is (HF zero-pads it,
//    which changes nothing). With γ_t = Σ_{s≤t} g_s inside the chunk (t, s chunk-relative):
//      A[t][s] = β_t (k̂_t·k̂_s) e^{γ_t−γ_s} for s < t;   T = (I + A)⁻¹ (forward substitution)
//      U = T (β ⊙ V)    W = T (β e^{γ} ⊙ K̂)    V' = U − W S
//      O = (e^{γ} ⊙ Q̂) S + tril_incl((Q̂ K̂ᵀ) ⊙ e^{γ_t−γ_s}) V'
//      S ← e^{γ_C} S + Σ_t (e^{γ_C−γ_t} k̂_t) ⊗ V'_t
//    It equals the recurrence in exact arithmetic; in f32 they agree within the tolerance the
//    tests state (gated_delta_rule_test.cc), not bit for bit.
//
// Numerics and invariance: each (sequence, value head) is one work item whose arithmetic depends
// only on that sequence's rows and state (16-lane SIMD along d_v, fixed order along d_k), so a
// sequence's outputs and state are bit-identical whatever the other sequences of the call, the
// thread count or the schedule. kAvx2 and kAvx512 give identical bits; kScalar differs in the
// last bits (no FMA). L2 sums are in f64. Prefill split at other points gives other chunk
// boundaries, so chunked results depend (within tolerance) on how a prompt is split.
// Threading: parallel over (sequence, value head) on `pool`; scratch is thread_local.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/recurrent_sequence.h"
#include "kernels/cpu/thread_pool.h"

namespace tessera::kernels::cpu {

inline constexpr int kGdnChunkSize = 64;
inline constexpr int kGdnMaxHeadDim = 512;
// kAuto's switch point: below it the chunk set-up (the solve of I + A) costs more than it saves
// (dev VM, h_v = 32, d = 128: 2 tokens 97 vs 131 us/token, 8 tokens 76 vs 64, 64 tokens 98 vs 67).
inline constexpr int64_t kGdnMinChunkedTokens = 8;

// Which k head serves value head h when h_v = r · h_k.
enum class GdnHeadMapping {
  kGrouped,  // kh = h / r: HF repeat_interleave; llama.cpp qwen3next (Qwen3-Next GGUFs)
  kTiled,    // kh = h % h_k: ggml's broadcast in the fused gated_delta_net op, which llama.cpp
             // uses for qwen35 GGUFs (the model wiring must confirm the order per variant)
};

struct GatedDeltaRuleParams {
  int num_k_heads = 0;  // h_k > 0
  int num_v_heads = 0;  // h_v, a positive multiple of h_k
  int head_k_dim = 0;   // d_k in [1, kGdnMaxHeadDim]
  int head_v_dim = 0;   // d_v in [1, kGdnMaxHeadDim]
  GdnHeadMapping head_mapping = GdnHeadMapping::kGrouped;
  bool l2_normalize_qk = true;
  float l2_eps = 1e-6f;
  float q_scale = 1.0f;  // the models: 1 / sqrt(d_k)
};

// Floats of one sequence's state: h_v * d_k * d_v.
inline int64_t GdnStateElements(const GatedDeltaRuleParams& p) {
  return static_cast<int64_t>(p.num_v_heads) * p.head_k_dim * p.head_v_dim;
}

// The step's per-token inputs. Strides are in floats and at least the row width.
struct GdnInputs {
  std::span<const float> q;  // [rows, h_k, d_k], stride q_stride
  int64_t q_stride = 0;
  std::span<const float> k;  // [rows, h_k, d_k], stride k_stride
  int64_t k_stride = 0;
  std::span<const float> v;  // [rows, h_v, d_v], stride v_stride
  int64_t v_stride = 0;
  std::span<const float> g;     // [rows, h_v], log-decay, finite and ≤ 0 (the models' g is;
                                // the chunked form relies on it: every e^x it forms has x ≤ 0)
  std::span<const float> beta;  // [rows, h_v], in [0, 1] in the models
};

enum class GdnForm {
  kRecurrent,  // token by token
  kChunked,    // chunks of kGdnChunkSize
  kAuto,       // per sequence: recurrent below kGdnMinChunkedTokens (decode, short verifies),
               // chunked from there on (prefill)
};

// Runs the rule for every sequence from the state in its slot, writes out[rows, h_v, d_v] and
// leaves each slot holding the state after its last token. A fresh sequence starts from a zero
// state (the worker clears the slot). The model's LinearAttend calls it once per layer per step
// with kAuto.
// Preconditions: params valid; sequences back to back from row 0 with distinct slots in
// [0, states.size() / GdnStateElements); inputs and out cover the rows; out overlaps no input.
void GatedDeltaRule(ThreadPool& pool, const GatedDeltaRuleParams& params, const GdnInputs& inputs,
                    std::span<const RecurrentSequence> sequences, std::span<float> states,
                    std::span<float> out, GdnForm form = GdnForm::kAuto, Isa isa = BestIsa());

// The rule's per-token gates from the layer's `ba` projection (HF Qwen3NextGatedDeltaNet.forward,
// llama.cpp build_layer_attn_linear), per row r and value head h:
//   beta[r][h] = sigmoid(b[r][h]) = 1 / (1 + exp(-b))
//   g[r][h]    = a_coef[h] · softplus(alpha[r][h] + dt_bias[h])
//                softplus(x) = log(1 + exp(x)), = x above 20 (PyTorch's and ggml's threshold)
// a_coef is GGUF `ssm_a` = −exp(A_log) (HF keeps A_log; the caller passes −exp(A_log)), dt_bias
// is `ssm_dt.bias`. b and alpha are [rows, h_v] views with row strides (qwen35's separate
// ssm_beta / ssm_alpha outputs, or one [rows, 2·h_v] output read at offsets 0 and h_v; qwen3next's
// ssm_ba interleaves b and a per k-head group, which the loader can undo by permuting the
// weight's rows once). f32 with std::exp / std::log1p: elementwise, batch invariant.
// Preconditions: a_coef.size() == dt_bias.size() == h_v > 0; views cover the rows; g and beta
// hold rows * h_v.
void GdnGates(std::span<const float> b, int64_t b_stride, std::span<const float> alpha,
              int64_t alpha_stride, std::span<const float> a_coef, std::span<const float> dt_bias,
              int64_t rows, std::span<float> g, std::span<float> beta);

}  // namespace tessera::kernels::cpu
