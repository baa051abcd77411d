#include "worker/models/llama_model.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tessera::worker {
namespace {

LlamaLayerIds DeclareLayer(const model::ModelConfig& c, int index, WeightDeclaration* w) {
  const std::string p = absl::StrCat("blk.", index, ".");
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t hidden = c.hidden_size;
  LlamaLayerIds ids{.attn_norm = w->Vector(p + "attn_norm.weight", hidden),
          .wq = w->Matrix(p + "attn_q.weight", q_dim, hidden),
          .wk = w->Matrix(p + "attn_k.weight", kv_dim, hidden),
          .wv = w->Matrix(p + "attn_v.weight", kv_dim, hidden),
          .wo = w->Matrix(p + "attn_output.weight", hidden, q_dim),
          .bq = w->Vector(p + "attn_q.bias", q_dim, /*optional=*/true),
          .bk = w->Vector(p + "attn_k.bias", kv_dim, /*optional=*/true),
          .bv = w->Vector(p + "attn_v.bias", kv_dim, /*optional=*/true),
          .q_norm = w->Vector(p + "attn_q_norm.weight", c.head_dim, /*optional=*/true),
          .k_norm = w->Vector(p + "attn_k_norm.weight", c.head_dim, /*optional=*/true),
          .ffn_norm = w->Vector(p + "ffn_norm.weight", hidden),
          .w_gate = w->Matrix(p + "ffn_gate.weight", c.ffn_size, hidden),
          .w_up = w->Matrix(p + "ffn_up.weight", c.ffn_size, hidden),
          .w_down = w->Matrix(p + "ffn_down.weight", hidden, c.ffn_size)};
  // One GEMM for q, k and v (the fused path adds the biases but applies no q/k norm: with those,
  // the parts) and one for gate and up, where the backend concatenates them (WeightSpec::parts).
  ids.w_qkv = w->Concat(p + "[attn_q | attn_k | attn_v]", {ids.wq, ids.wk, ids.wv},
                        {ids.q_norm, ids.k_norm});
  ids.w_gate_up = w->Concat(p + "[ffn_gate | ffn_up]", {ids.w_gate, ids.w_up});
  return ids;
}

}  // namespace

ModelHeadIds DeclareModelHead(const model::ModelConfig& c, WeightDeclaration* w) {
  ModelHeadIds head;
  head.token_embd = w->Add({.name = "token_embd.weight",
                            .role = c.tied_embeddings ? WeightRole::kMatrix : WeightRole::kEmbedding,
                            .dims = {static_cast<uint64_t>(c.hidden_size),
                                     static_cast<uint64_t>(c.vocab_size)},
                            .optional = false,
                            .positive = false,
                            .f32_output = c.tied_embeddings});
  head.output_norm = w->Vector("output_norm.weight", c.hidden_size);
  head.output = c.tied_embeddings
                    ? head.token_embd
                    : w->Add({.name = "output.weight",
                              .role = WeightRole::kMatrix,
                              .dims = {static_cast<uint64_t>(c.hidden_size),
                                       static_cast<uint64_t>(c.vocab_size)},
                              .f32_output = true});
  head.rope_freqs = w->Add({.name = "rope_freqs.weight",
                            .role = WeightRole::kDense,
                            .dims = {static_cast<uint64_t>(c.rope_dim / 2)},
                            .optional = true,
                            .positive = true});
  return head;
}

LlamaPlan DeclareLlama(const model::ModelConfig& c, WeightDeclaration* weights,
                       ActivationTable* acts) {
  LlamaPlan plan;
  plan.head = DeclareModelHead(c, weights);
  for (int l = 0; l < c.num_layers; ++l) plan.layers.push_back(DeclareLayer(c, l, weights));
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  const auto tokens = [&](const char* name, int64_t width, bool normed_in_place = false) {
    return acts->Add({.name = name, .rows = ActRows::kTokens, .width = width,
                      .type = ActType::kCompute, .normed_in_place = normed_in_place});
  };
  LlamaActs& a = plan.acts;
  a.x = tokens("x", c.hidden_size);
  a.normed = tokens("normed", c.hidden_size);
  a.qkv = tokens("qkv", q_dim + 2 * kv_dim);
  a.q = tokens("q", q_dim, /*normed_in_place=*/true);
  a.k = tokens("k", kv_dim, /*normed_in_place=*/true);
  a.v = tokens("v", kv_dim);
  a.attention = tokens("attention", q_dim);
  a.projected = tokens("projected", c.hidden_size);
  a.gate = tokens("gate", c.ffn_size);
  a.up = tokens("up", c.ffn_size);
  a.gate_up = tokens("gate_up", 2 * int64_t{c.ffn_size});
  a.final_rows = acts->Add({.name = "final", .rows = ActRows::kSamplingRows,
                            .width = c.hidden_size, .type = ActType::kCompute,
                            .normed_in_place = true});
  a.logits = acts->Add({.name = "logits", .rows = ActRows::kSamplingRows,
                        .width = c.vocab_size, .type = ActType::kF32, .normed_in_place = false});
  return plan;
}

}  // namespace tessera::worker
