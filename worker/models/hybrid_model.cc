#include "worker/models/hybrid_model.h"

#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"

namespace tessera::worker {
namespace {

// The role of a layer tensor hybrid_tensors.h expects: expert stacks are 3-D, the conv kernel and
// the 1-D tensors are f32 values, except the shared expert's gate, a projection to one logit.
WeightRole RoleOf(const model::ExpectedTensor& t) {
  if (t.dims.size() == 3) return WeightRole::kExperts;
  if (absl::StrContains(t.name, "ssm_conv1d")) return WeightRole::kDense;
  if (t.dims.size() == 2 || absl::StrContains(t.name, "ffn_gate_inp_shexp")) {
    return WeightRole::kMatrix;
  }
  return WeightRole::kDense;
}

// Declares layer `index`'s tensors as hybrid_tensors.h lists them; returns a lookup by suffix.
class LayerDeclaration {
 public:
  LayerDeclaration(const model::ModelConfig& c, const model::HybridTensorForms& forms, int index,
                   WeightDeclaration* weights)
      : index_(index), weights_(weights) {
    for (const model::ExpectedTensor& t : model::ExpectedLayerTensors(c, index, forms)) {
      // The router and the shared expert's gate write f32 logits.
      weights->Add({.name = t.name, .role = RoleOf(t), .dims = t.dims, .optional = false,
                    .positive = false,
                    .f32_output = absl::StrContains(t.name, "ffn_gate_inp")});
    }
  }
  // The id of "blk.<index>.<suffix>", kNoWeight when this layer has none.
  WeightId operator()(std::string_view suffix) const {
    return weights_->Find(absl::StrCat("blk.", index_, ".", util::ToAbsl(suffix)));
  }

 private:
  int index_;
  WeightDeclaration* weights_;
};

HybridLayerIds DeclareLayer(const model::ModelConfig& c, const model::HybridTensorForms& forms,
                            int index, WeightDeclaration* weights) {
  const LayerDeclaration id(c, forms, index, weights);
  HybridLayerIds layer;
  layer.kind = c.hybrid->layer_kinds[index];
  layer.attn_norm = id("attn_norm.weight");
  layer.post_norm = id("post_attention_norm.weight");
  layer.gdn = {.qkv = id("attn_qkv.weight"), .z = id("attn_gate.weight"),
               .ssm_in = id("ssm_in.weight"), .beta = id("ssm_beta.weight"),
               .alpha = id("ssm_alpha.weight"), .ba = id("ssm_ba.weight"),
               .op = {.conv = id("ssm_conv1d.weight"), .a = id("ssm_a"),
                      .dt_bias = id("ssm_dt.bias"), .norm = id("ssm_norm.weight")},
               .out = id("ssm_out.weight")};
  layer.attn = {.wq = id("attn_q.weight"), .wk = id("attn_k.weight"), .wv = id("attn_v.weight"),
                .wo = id("attn_output.weight"), .q_norm = id("attn_q_norm.weight"),
                .k_norm = id("attn_k_norm.weight")};
  layer.ffn_gate = id("ffn_gate.weight");
  layer.ffn_up = id("ffn_up.weight");
  layer.ffn_down = id("ffn_down.weight");
  if (layer.ffn_gate != kNoWeight && layer.ffn_up != kNoWeight) {
    layer.ffn_gate_up = weights->Concat(absl::StrCat("blk.", index, ".[ffn_gate | ffn_up]"),
                                        {layer.ffn_gate, layer.ffn_up});
  }
  layer.moe = {.router = id("ffn_gate_inp.weight"), .gate_exps = id("ffn_gate_exps.weight"),
               .up_exps = id("ffn_up_exps.weight"),
               .gate_up_exps = id("ffn_gate_up_exps.weight"),
               .down_exps = id("ffn_down_exps.weight"),
               .shared_gate = id("ffn_gate_shexp.weight"), .shared_up = id("ffn_up_shexp.weight"),
               .shared_down = id("ffn_down_shexp.weight"),
               .shared_expert_gate = id("ffn_gate_inp_shexp.weight")};
  return layer;
}

HybridActs DeclareActivations(const model::ModelConfig& c, const model::HybridTensorForms& forms,
                              ActivationTable* acts) {
  const model::HybridLayout& h = *c.hybrid;
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t value_dim = model::GdnValueDim(h.gdn);
  const int64_t channels = model::GdnConvChannels(h.gdn);
  const int64_t v_heads = h.gdn.num_v_heads;
  const auto tokens = [&](const char* name, int64_t width, ActType type = ActType::kCompute,
                          bool normed_in_place = false) {
    return acts->Add({.name = name, .rows = ActRows::kTokens, .width = width, .type = type,
                      .normed_in_place = normed_in_place});
  };
  HybridActs a{};
  a.x = tokens("x", c.hidden_size);
  a.normed = tokens("normed", c.hidden_size);
  a.projected = tokens("projected", c.hidden_size);
  a.query_gate = tokens("query_gate", 2 * q_dim);
  a.q = tokens("q", q_dim, ActType::kCompute, /*normed_in_place=*/true);
  a.gate = tokens("attention_gate", q_dim);
  a.k = tokens("k", kv_dim, ActType::kCompute, /*normed_in_place=*/true);
  a.v = tokens("v", kv_dim);
  a.attention = tokens("attention", q_dim);
  a.fused = forms.gdn_fused_qkvz ? tokens("gdn_qkvz", channels + value_dim) : kNoAct;
  a.ba = h.gdn.head_order == model::GdnHeadOrder::kGrouped ? tokens("gdn_ba", 2 * v_heads) : kNoAct;
  a.gdn = {.qkv = tokens("gdn_qkv", channels),
           .z = tokens("gdn_z", value_dim),
           .beta_in = tokens("gdn_beta_in", v_heads),
           .alpha_in = tokens("gdn_alpha_in", v_heads),
           .conv = tokens("gdn_conv", channels),
           .g = tokens("gdn_g", v_heads, ActType::kF32),
           .beta = tokens("gdn_beta", v_heads, ActType::kF32),
           .out = tokens("gdn_out", value_dim)};
  a.ffn_gate = h.moe ? kNoAct : tokens("ffn_gate", c.ffn_size);
  a.ffn_up = h.moe ? kNoAct : tokens("ffn_up", c.ffn_size);
  a.ffn_gate_up = h.moe ? kNoAct : tokens("ffn_gate_up", 2 * int64_t{c.ffn_size});
  a.final_rows = acts->Add({.name = "final", .rows = ActRows::kSamplingRows,
                            .width = c.hidden_size, .type = ActType::kCompute,
                            .normed_in_place = true});
  a.logits = acts->Add({.name = "logits", .rows = ActRows::kSamplingRows,
                        .width = c.vocab_size, .type = ActType::kF32, .normed_in_place = false});
  return a;
}

}  // namespace

HybridPlan DeclareHybrid(const model::ModelConfig& c, const model::HybridTensorForms& forms,
                         WeightDeclaration* weights, ActivationTable* acts) {
  TESSERA_CHECK(c.hybrid.has_value(), "DeclareHybrid needs a hybrid config");
  HybridPlan plan;
  plan.forms = forms;
  plan.head = DeclareModelHead(c, weights);
  int num_attention = 0;
  int num_linear = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    HybridLayerIds layer = DeclareLayer(c, forms, l, weights);
    layer.state_index =
        layer.kind == model::LayerKind::kAttention ? num_attention++ : num_linear++;
    plan.layers.push_back(layer);
  }
  plan.acts = DeclareActivations(c, forms, acts);
  return plan;
}

}  // namespace tessera::worker
