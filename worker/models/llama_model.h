// The llama-family forward step (Llama 2/3, SmolLM2, Qwen2/3 dense: GQA, RoPE, RMSNorm,
// SwiGLU, optional q/k/v biases and per-head q/k norms), written once against an ops backend
// (DESIGN.md §5, §9). A model definition never names a backend; an op never names an
// architecture. Backends: worker/cpu/cpu_llama_ops.h (and the cuda backend, on the same ops).
//
// The Ops concept (duck-typed, checked by the compiler where LlamaForward is instantiated):
//   using Weights = ...;             layer(l) returns its per-layer weights with the members
//                                    attn_norm wq wk wv wo bq bk bv q_norm k_norm ffn_norm
//                                    w_gate w_up w_down; output_norm(), output() the head
//   bool HasBias(bias) / HasNorm(norm)  for the optional tensors
//   Embed(out)                         out[n, hidden] = embedding rows of the step's tokens
//   RmsNorm(in, weight, out, groups)   normalise every `hidden/groups`-wide group of each row
//   Project(in, {{weight, out}, ...})  out = in · weightᵀ for up to 4 weights sharing `in`
//   AddBias(bias, inout)               inout[r, :] += bias
//   Rope(inout, num_heads)             rotary embedding at the step's positions
//   Attend(layer, q, k, v, out)        write k/v through the slot mapping into the layer's paged
//                                      pool, then causal paged attention over it
//   SwiGlu(gate, up, out)              out = silu(gate) * up
//   Add(inout, delta)                  residual add
//   GatherLastRows(in, out)            the last token row of each sequence that samples
// Activations are named by LlamaActivation; the backend owns and sizes their storage (rows:
// the step's tokens, except kFinal and kLogits: one row per sampling sequence).
#pragma once

#include "common/model/model_config.h"

namespace tessera::worker {

enum class LlamaActivation {
  kX,          // the residual stream [n, hidden]
  kNormed,     // [n, hidden]
  kQ,          // [n, num_heads * head_dim]
  kK,          // [n, num_kv_heads * head_dim]
  kV,          // [n, num_kv_heads * head_dim]
  kAttention,  // [n, num_heads * head_dim]
  kProjected,  // [n, hidden]
  kGate,       // [n, ffn]
  kUp,         // [n, ffn]
  kFinal,      // [rows, hidden], rows = sequences that sample
  kLogits,     // [rows, vocab]
};

template <class Ops>
void LlamaAttentionBlock(Ops& ops, const model::ModelConfig& config, int layer) {
  using A = LlamaActivation;
  const auto& w = ops.layer(layer);
  ops.RmsNorm(A::kX, w.attn_norm, A::kNormed, 1);
  ops.Project(A::kNormed, {{w.wq, A::kQ}, {w.wk, A::kK}, {w.wv, A::kV}});
  if (ops.HasBias(w.bq)) ops.AddBias(w.bq, A::kQ);
  if (ops.HasBias(w.bk)) ops.AddBias(w.bk, A::kK);
  if (ops.HasBias(w.bv)) ops.AddBias(w.bv, A::kV);
  if (ops.HasNorm(w.q_norm)) {  // qk-norm (Qwen3): RMSNorm over each head's vector
    ops.RmsNorm(A::kQ, w.q_norm, A::kQ, config.num_heads);
    ops.RmsNorm(A::kK, w.k_norm, A::kK, config.num_kv_heads);
  }
  ops.Rope(A::kQ, config.num_heads);
  ops.Rope(A::kK, config.num_kv_heads);
  ops.Attend(layer, A::kQ, A::kK, A::kV, A::kAttention);
  ops.Project(A::kAttention, {{w.wo, A::kProjected}});
  ops.Add(A::kX, A::kProjected);
}

template <class Ops>
void LlamaFeedForwardBlock(Ops& ops, int layer) {
  using A = LlamaActivation;
  const auto& w = ops.layer(layer);
  ops.RmsNorm(A::kX, w.ffn_norm, A::kNormed, 1);
  ops.Project(A::kNormed, {{w.w_gate, A::kGate}, {w.w_up, A::kUp}});
  ops.SwiGlu(A::kGate, A::kUp, A::kGate);
  ops.Project(A::kGate, {{w.w_down, A::kProjected}});
  ops.Add(A::kX, A::kProjected);
}

// One forward step over the batch the backend prepared; leaves the logits of the sampling
// sequences in kLogits.
template <class Ops>
void LlamaForward(Ops& ops, const model::ModelConfig& config) {
  using A = LlamaActivation;
  ops.Embed(A::kX);
  for (int layer = 0; layer < config.num_layers; ++layer) {
    LlamaAttentionBlock(ops, config, layer);
    LlamaFeedForwardBlock(ops, layer);
  }
  ops.GatherLastRows(A::kX, A::kFinal);
  ops.RmsNorm(A::kFinal, ops.output_norm(), A::kFinal, 1);
  ops.Project(A::kFinal, {{ops.output(), A::kLogits}});
}

}  // namespace tessera::worker
