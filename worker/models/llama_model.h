// The llama-family model (Llama 2/3, SmolLM2, Qwen2/3 dense: GQA, RoPE, RMSNorm, SwiGLU, optional
// q/k/v biases and per-head q/k norms): its weights and activations, declared from the config
// (DeclareLlama), and its forward step over any backend's ops (model_ops.h).
#pragma once

#include <vector>

#include "common/model/model_config.h"
#include "worker/models/model_ops.h"

namespace tessera::worker {

// The embedding, the final norm and the output head every model has, plus RoPE divisors.
struct ModelHeadIds {
  WeightId token_embd = kNoWeight;   // [vocab, hidden]
  WeightId output_norm = kNoWeight;  // [hidden]
  WeightId output = kNoWeight;       // [vocab, hidden]; token_embd when tied
  WeightId rope_freqs = kNoWeight;   // optional [rope_dim / 2] (Llama 3.1+ frequency scaling)
};

struct LlamaLayerIds {
  WeightId attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm, w_gate, w_up, w_down;
  WeightId w_qkv = kNoWeight, w_gate_up = kNoWeight;  // concatenations (WeightSpec::parts)
};

struct LlamaActs {
  ActId x, normed, qkv, q, k, v, attention, projected, gate, up, gate_up, final_rows, logits;
};

struct LlamaPlan {
  ModelHeadIds head;
  std::vector<LlamaLayerIds> layers;
  LlamaActs acts;
};

// Declares the head (shared with other models: DeclareModelHead) and every layer.
LlamaPlan DeclareLlama(const model::ModelConfig& config, WeightDeclaration* weights,
                       ActivationTable* activations);
ModelHeadIds DeclareModelHead(const model::ModelConfig& config, WeightDeclaration* weights);

// The attention block from its normed input (a.normed: the caller fused the norm with the
// residual add before it) to the residual add, fused with the feed-forward block's norm.
template <class Ops>
void LlamaAttentionBlock(Ops& ops, const model::ModelConfig& config, const LlamaActs& a,
                         const LlamaLayerIds& w, int layer) {
  if (ops.Has(w.w_qkv)) {  // one GEMM (no q/k norms: the backend checked)
    ops.Project(a.normed, {{w.w_qkv, a.qkv}});
    ops.RotaryAttendQkv(layer, a.qkv, {w.bq, w.bk, w.bv}, a.q, a.k, a.v, a.attention);
    ops.Project(a.attention, {{w.wo, a.projected}});
    ops.AddRmsNorm(a.x, a.projected, w.ffn_norm, a.normed);
    return;
  }
  ops.Project(a.normed, {{w.wq, a.q}, {w.wk, a.k}, {w.wv, a.v}});
  if (ops.Has(w.bq)) ops.AddBias(w.bq, a.q);
  if (ops.Has(w.bk)) ops.AddBias(w.bk, a.k);
  if (ops.Has(w.bv)) ops.AddBias(w.bv, a.v);
  if (ops.Has(w.q_norm)) {  // qk-norm (Qwen3): RMSNorm over each head's vector
    ops.RmsNorm(a.q, w.q_norm, a.q, config.num_heads);
    ops.RmsNorm(a.k, w.k_norm, a.k, config.num_kv_heads);
  }
  ops.RotaryAttend(layer, a.q, a.k, a.v, a.attention);
  ops.Project(a.attention, {{w.wo, a.projected}});
  ops.AddRmsNorm(a.x, a.projected, w.ffn_norm, a.normed);
}

// The feed-forward block from its normed input to its output in a.projected (the caller adds it
// to the residual stream, fused with the next norm).
template <class Ops>
void LlamaFeedForwardBlock(Ops& ops, const LlamaActs& a, const LlamaLayerIds& w) {
  if (ops.Has(w.w_gate_up)) {
    ops.ProjectSwiGlu(a.normed, w.w_gate_up, a.gate_up, a.gate);
  } else {
    ops.Project(a.normed, {{w.w_gate, a.gate}, {w.w_up, a.up}});
    ops.SwiGlu(a.gate, a.up, a.gate);
  }
  ops.Project(a.gate, {{w.w_down, a.projected}});
}

// The final norm and the head over the rows that sample; shared by every model.
template <class Ops>
void ModelHeadForward(Ops& ops, const ModelHeadIds& head, ActId x, ActId final_rows,
                      ActId logits) {
  ops.GatherLastRows(x, final_rows);
  ops.RmsNorm(final_rows, head.output_norm, final_rows, 1);
  ops.Project(final_rows, {{head.output, logits}});
}

// One forward step over the batch the backend prepared; leaves the sampling rows' logits in
// plan.acts.logits.
template <class Ops>
void LlamaForward(Ops& ops, const model::ModelConfig& config, const LlamaPlan& plan) {
  const LlamaActs& a = plan.acts;
  ops.Embed(plan.head.token_embd, a.x);
  ops.RmsNorm(a.x, plan.layers[0].attn_norm, a.normed, 1);
  for (int layer = 0; layer < config.num_layers; ++layer) {
    LlamaAttentionBlock(ops, config, a, plan.layers[layer], layer);
    LlamaFeedForwardBlock(ops, a, plan.layers[layer]);
    if (layer + 1 < config.num_layers) {
      ops.AddRmsNorm(a.x, a.projected, plan.layers[layer + 1].attn_norm, a.normed);
    } else {
      ops.Add(a.x, a.projected);
    }
  }
  ModelHeadForward(ops, plan.head, a.x, a.final_rows, a.logits);
}

}  // namespace tessera::worker
