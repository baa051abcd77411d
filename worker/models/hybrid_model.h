// The hybrid Gated-DeltaNet models (llama.cpp's qwen3next, qwen35, qwen35moe; DESIGN.md §5): GDN
// linear-attention layers with a per-sequence recurrent state, gated full-attention layers over
// the paged KV cache (every `full_attention_interval`-th), and a dense SwiGLU or an MoE FFN
// (routed experts + a sigmoid-gated shared expert) after each. Its weights are declared from the
// layout hybrid_tensors.h checks (same names and shapes), and the forward runs on any backend's
// ops (model_ops.h). The float64 oracle tools/oracle/hybrid_reference.py is the same model.
#pragma once

#include <vector>

#include "common/model/hybrid_tensors.h"
#include "common/model/model_config.h"
#include "worker/models/llama_model.h"
#include "worker/models/model_ops.h"

namespace tessera::worker {

struct HybridGdnIds {
  WeightId qkv = kNoWeight, z = kNoWeight;           // attn_qkv, attn_gate
  WeightId ssm_in = kNoWeight;                        // legacy qwen3next: fused per key head
  WeightId beta = kNoWeight, alpha = kNoWeight;       // qwen35*: ssm_beta, ssm_alpha
  WeightId ba = kNoWeight;                            // qwen3next: [b (r) | a (r)] per key head
  GdnOpWeights op;
  WeightId out = kNoWeight;                           // ssm_out
};

struct HybridAttentionIds {
  WeightId wq = kNoWeight;  // attn_q: per head [query | gate]
  WeightId wk = kNoWeight, wv = kNoWeight, wo = kNoWeight, q_norm = kNoWeight, k_norm = kNoWeight;
};

struct HybridLayerIds {
  model::LayerKind kind = model::LayerKind::kAttention;
  int state_index = 0;  // attention: KV pool layer; GDN: recurrent state layer
  WeightId attn_norm = kNoWeight, post_norm = kNoWeight;
  HybridGdnIds gdn;
  HybridAttentionIds attn;
  WeightId ffn_gate = kNoWeight, ffn_up = kNoWeight, ffn_down = kNoWeight;  // dense FFN
  WeightId ffn_gate_up = kNoWeight;  // [ffn_gate | ffn_up] (WeightSpec::parts), dense FFN
  MoeOpWeights moe;                                                        // MoE FFN
};

struct HybridActs {
  ActId x, normed, projected;
  ActId query_gate, q, gate, k, v, attention;   // gated attention
  ActId fused, ba;                              // GDN inputs in the fused forms (when used)
  GdnOpActs gdn;
  ActId ffn_gate, ffn_up, ffn_gate_up;          // dense FFN (when used)
  ActId final_rows, logits;
};

struct HybridPlan {
  ModelHeadIds head;
  std::vector<HybridLayerIds> layers;
  HybridActs acts;
  model::HybridTensorForms forms;
};

// Precondition: config.hybrid is set. `forms` picks the storage of the optional fused tensors
// (legacy `ssm_in`, `ffn_gate_up_exps`), as CheckHybridTensors detected them.
HybridPlan DeclareHybrid(const model::ModelConfig& config, const model::HybridTensorForms& forms,
                         WeightDeclaration* weights, ActivationTable* acts);

template <class Ops>
void HybridGdnMixer(Ops& ops, const model::ModelConfig& config, const HybridActs& a,
                    const HybridLayerIds& w) {
  const model::GdnDims& d = config.hybrid->gdn;
  const int64_t r = d.num_v_heads / d.num_k_heads;
  const int64_t key_dim = int64_t{d.num_k_heads} * d.head_k_dim;
  const HybridGdnIds& g = w.gdn;
  if (g.ssm_in != kNoWeight) {  // [q | k | v (r heads) | z (r heads)] per key head
    ops.Project(a.normed, {{g.ssm_in, a.fused}, {g.ba, a.ba}});
    ops.SplitHeads(a.fused, d.num_k_heads,
                   {{a.gdn.qkv, 0, d.head_k_dim}, {a.gdn.qkv, key_dim, d.head_k_dim},
                    {a.gdn.qkv, 2 * key_dim, r * d.head_v_dim}, {a.gdn.z, 0, r * d.head_v_dim}});
  } else if (g.ba != kNoWeight) {
    ops.Project(a.normed, {{g.qkv, a.gdn.qkv}, {g.z, a.gdn.z}, {g.ba, a.ba}});
  } else {
    ops.Project(a.normed,
                {{g.qkv, a.gdn.qkv}, {g.z, a.gdn.z}, {g.beta, a.gdn.beta_in}, {g.alpha, a.gdn.alpha_in}});
  }
  if (g.ba != kNoWeight) {  // [b (r) | a (r)] per key head -> value heads in grouped order
    ops.SplitHeads(a.ba, d.num_k_heads, {{a.gdn.beta_in, 0, r}, {a.gdn.alpha_in, 0, r}});
  }
  ops.LinearAttend(w.state_index, g.op, a.gdn);
  ops.Project(a.gdn.out, {{g.out, a.projected}});
}

template <class Ops>
void HybridAttentionMixer(Ops& ops, const model::ModelConfig& config, const HybridActs& a,
                          const HybridLayerIds& w) {
  const HybridAttentionIds& t = w.attn;
  ops.Project(a.normed, {{t.wq, a.query_gate}, {t.wk, a.k}, {t.wv, a.v}});
  ops.SplitHeads(a.query_gate, config.num_heads,
                 {{a.q, 0, config.head_dim}, {a.gate, 0, config.head_dim}});
  ops.RmsNorm(a.q, t.q_norm, a.q, config.num_heads);
  ops.RmsNorm(a.k, t.k_norm, a.k, config.num_kv_heads);
  ops.RotaryAttend(w.state_index, a.q, a.k, a.v, a.attention);
  ops.SigmoidMul(a.gate, a.attention);
  ops.Project(a.attention, {{t.wo, a.projected}});
}

template <class Ops>
void HybridFeedForward(Ops& ops, const HybridActs& a, const HybridLayerIds& w) {
  if (w.moe.router != kNoWeight) {
    ops.MoeFfn(a.normed, w.moe, a.projected);
    return;
  }
  if (ops.Has(w.ffn_gate_up)) {  // one GEMM where the backend concatenated the two
    ops.ProjectSwiGlu(a.normed, w.ffn_gate_up, a.ffn_gate_up, a.ffn_gate);
  } else {
    ops.Project(a.normed, {{w.ffn_gate, a.ffn_gate}, {w.ffn_up, a.ffn_up}});
    ops.SwiGlu(a.ffn_gate, a.ffn_up, a.ffn_gate);
  }
  ops.Project(a.ffn_gate, {{w.ffn_down, a.projected}});
}

template <class Ops>
void HybridForward(Ops& ops, const model::ModelConfig& config, const HybridPlan& plan) {
  const HybridActs& a = plan.acts;
  ops.Embed(plan.head.token_embd, a.x);
  ops.RmsNorm(a.x, plan.layers.front().attn_norm, a.normed, 1);
  for (size_t i = 0; i < plan.layers.size(); ++i) {  // residual adds fused with the next norm
    const HybridLayerIds& layer = plan.layers[i];
    if (layer.kind == model::LayerKind::kGatedDeltaNet) {
      HybridGdnMixer(ops, config, a, layer);
    } else {
      HybridAttentionMixer(ops, config, a, layer);
    }
    ops.AddRmsNorm(a.x, a.projected, layer.post_norm, a.normed);
    HybridFeedForward(ops, a, layer);
    if (i + 1 < plan.layers.size()) {
      ops.AddRmsNorm(a.x, a.projected, plan.layers[i + 1].attn_norm, a.normed);
    } else {
      ops.Add(a.x, a.projected);
    }
  }
  ModelHeadForward(ops, plan.head, a.x, a.final_rows, a.logits);
}

}  // namespace tessera::worker
