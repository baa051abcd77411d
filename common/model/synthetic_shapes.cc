#include "common/model/synthetic_shapes.h"

#include "absl/strings/str_cat.h"
#include "common/model/hybrid_layout.h"
#include "common/util/absl_compat.h"

namespace tessera::model {
namespace {

// The linear-attention and expert widths of a hybrid shape (all 0 for an attention-only one).
struct HybridShape {
  int full_attention_interval = 0;  // > 0: a hybrid (every interval-th layer attends)
  int rope_dim = 0;                 // rotated dims per attention head (partial rotary)
  int conv_kernel = 0, k_heads = 0, v_heads = 0, head_k_dim = 0, head_v_dim = 0;
  int experts = 0, experts_used = 0, expert_ffn = 0, shared_ffn = 0;  // experts = 0: dense
};

struct Shape {
  std::string_view name;
  std::string_view architecture;  // picks the RoPE pairing (ArchitectureUsesNeoxRope)
  int num_layers, hidden_size, ffn_size, num_heads, num_kv_heads, head_dim;
  int vocab_size, context_length;
  double rope_theta, rms_norm_eps;
  bool tied_embeddings, qkv_bias;
  int32_t bos_token_id, eos_token_id;
  HybridShape hybrid;
};

// The real shapes are their published Hugging Face config.json files (hidden_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
// rope_theta, rms_norm_eps, tie_word_embeddings, bos/eos_token_id, max_position_embeddings):
//   llama-3.1-8b  huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json. The context is
//                 capped at 32768 of its 131072: the runner sizes per-slot block tables, the
//                 decode split workspace and the RoPE table by the context, and a full-length
//                 sequence alone would need 16 GiB of bf16 K/V. Its "llama3" RoPE frequency
//                 scaling is left out: it changes which angles the table holds, not the work.
//   qwen2.5-1.5b  huggingface.co/Qwen/Qwen2.5-1.5B-Instruct/blob/main/config.json (q/k/v
//                 biases: Qwen2 attention always has them; EOS is <|im_end|>).
//   qwen3-next-80b-a3b-l12  huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json
//                 (plus head_dim, partial_rotary_factor 0.25, linear_* GDN widths, num_experts,
//                 num_experts_per_tok, moe/shared_expert_intermediate_size,
//                 full_attention_interval) with 12 of its 48 layers: every width is the real one,
//                 so a layer costs what it costs in the model, and the weights (about 20 B
//                 parameters, 40 GB in bf16, nearly all of them experts) fit one 80 GB GPU; the
//                 context is capped at 32768 of its 262144.
// `tiny` is ours: head_dim 64 (the smallest the attention kernels are built for), every optional
// tensor (biases, a separate output head), small enough for the SIMT-emulated device;
// `tiny-hybrid` its qwen3next counterpart (GDN + gated attention + routed and shared experts).
constexpr Shape kShapes[] = {
    {.name = "llama-3.1-8b", .architecture = "llama", .num_layers = 32, .hidden_size = 4096,
     .ffn_size = 14336, .num_heads = 32, .num_kv_heads = 8, .head_dim = 128,
     .vocab_size = 128256, .context_length = 32768, .rope_theta = 500000.0,
     .rms_norm_eps = 1e-5, .tied_embeddings = false, .qkv_bias = false,
     .bos_token_id = 128000, .eos_token_id = 128001},
    {.name = "qwen2.5-1.5b", .architecture = "qwen2", .num_layers = 28, .hidden_size = 1536,
     .ffn_size = 8960, .num_heads = 12, .num_kv_heads = 2, .head_dim = 128,
     .vocab_size = 151936, .context_length = 32768, .rope_theta = 1000000.0,
     .rms_norm_eps = 1e-6, .tied_embeddings = true, .qkv_bias = true,
     .bos_token_id = 151643, .eos_token_id = 151645},
    {.name = "tiny", .architecture = "llama", .num_layers = 2, .hidden_size = 128,
     .ffn_size = 256, .num_heads = 2, .num_kv_heads = 1, .head_dim = 64, .vocab_size = 512,
     .context_length = 512, .rope_theta = 10000.0, .rms_norm_eps = 1e-5,
     .tied_embeddings = false, .qkv_bias = true, .bos_token_id = 1, .eos_token_id = 2},
    {.name = "qwen3-next-80b-a3b-l12", .architecture = "qwen3next", .num_layers = 12,
     .hidden_size = 2048, .ffn_size = 5120, .num_heads = 16, .num_kv_heads = 2, .head_dim = 256,
     .vocab_size = 151936, .context_length = 32768, .rope_theta = 10000000.0,
     .rms_norm_eps = 1e-6, .tied_embeddings = false, .qkv_bias = false,
     .bos_token_id = 151643, .eos_token_id = 151645,
     .hybrid = {.full_attention_interval = 4, .rope_dim = 64, .conv_kernel = 4, .k_heads = 16,
                .v_heads = 32, .head_k_dim = 128, .head_v_dim = 128, .experts = 512,
                .experts_used = 10, .expert_ffn = 512, .shared_ffn = 512}},
    {.name = "tiny-hybrid", .architecture = "qwen3next", .num_layers = 4, .hidden_size = 128,
     .ffn_size = 64, .num_heads = 2, .num_kv_heads = 1, .head_dim = 64, .vocab_size = 512,
     .context_length = 512, .rope_theta = 10000.0, .rms_norm_eps = 1e-6,
     .tied_embeddings = false, .qkv_bias = false, .bos_token_id = 1, .eos_token_id = 2,
     .hybrid = {.full_attention_interval = 4, .rope_dim = 32, .conv_kernel = 4, .k_heads = 2,
                .v_heads = 4, .head_k_dim = 32, .head_v_dim = 32, .experts = 8,
                .experts_used = 2, .expert_ffn = 64, .shared_ffn = 64}},
};

// The layout ReadHybridLayout would read from such a model's metadata.
HybridLayout LayoutOf(const Shape& s) {
  const HybridShape& h = s.hybrid;
  HybridLayout layout;
  layout.full_attention_interval = h.full_attention_interval;
  for (int l = 0; l < s.num_layers; ++l) {
    layout.layer_kinds.push_back((l + 1) % h.full_attention_interval == 0
                                     ? LayerKind::kAttention
                                     : LayerKind::kGatedDeltaNet);
  }
  layout.gdn = {.conv_kernel = h.conv_kernel, .num_k_heads = h.k_heads, .num_v_heads = h.v_heads,
                .head_k_dim = h.head_k_dim, .head_v_dim = h.head_v_dim,
                .head_order = GdnHeadOrder::kGrouped};
  if (h.experts > 0) {
    layout.moe = MoeDims{.num_experts = h.experts, .num_experts_used = h.experts_used,
                         .expert_ffn_size = h.expert_ffn, .shared_expert_ffn_size = h.shared_ffn};
  }
  return layout;
}

SyntheticModel FromShape(const Shape& s) {
  SyntheticModel model;
  ModelConfig& c = model.config;
  c.architecture = std::string(s.architecture);
  c.name = absl::StrCat(util::ToAbsl(s.name), "-dummy");
  c.num_layers = s.num_layers;
  c.hidden_size = s.hidden_size;
  c.ffn_size = s.ffn_size;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.head_dim = s.head_dim;
  c.rope_dim = s.hybrid.rope_dim > 0 ? s.hybrid.rope_dim : s.head_dim;
  if (s.hybrid.full_attention_interval > 0) c.hybrid = LayoutOf(s);
  c.context_length = s.context_length;
  c.vocab_size = s.vocab_size;
  c.rope_theta = s.rope_theta;
  c.rope_scaling.original_context_length = s.context_length;
  c.rope_neox = ArchitectureUsesNeoxRope(s.architecture);
  c.rms_norm_eps = s.rms_norm_eps;
  c.tied_embeddings = s.tied_embeddings;
  model.qkv_bias = s.qkv_bias;
  model.bos_token_id = s.bos_token_id;
  model.eos_token_id = s.eos_token_id;
  return model;
}

}  // namespace

std::string SyntheticShapeNames() {
  std::string names;
  for (const Shape& s : kShapes) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", util::ToAbsl(s.name));
  }
  return names;
}

absl::StatusOr<SyntheticModel> MakeSyntheticModel(std::string_view name, int vocab_size) {
  const Shape* shape = nullptr;
  for (const Shape& s : kShapes) {
    if (s.name == name) shape = &s;
  }
  if (shape == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown synthetic model shape '", util::ToAbsl(name),
                     "' (known: ", SyntheticShapeNames(), ")"));
  }
  SyntheticModel model = FromShape(*shape);
  if (vocab_size == 0) return model;
  if (vocab_size < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("a synthetic vocabulary needs at least 2 tokens (BOS, EOS), got ",
                     vocab_size));
  }
  model.config.vocab_size = vocab_size;
  if (model.bos_token_id >= vocab_size) model.bos_token_id = vocab_size - 2;
  if (model.eos_token_id >= vocab_size) model.eos_token_id = vocab_size - 1;
  return model;
}

}  // namespace tessera::model
