#include "common/safetensors/hf_tensor_names.h"

#include <cctype>

namespace tessera::safetensors {
namespace {

struct NamePair {
  std::string_view hf;
  std::string_view gguf;
};

constexpr NamePair kGlobalNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

// After "model.layers.N." / "blk.N.".
constexpr NamePair kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

constexpr std::string_view kHfLayerPrefix = "model.layers.";
constexpr std::string_view kGgufLayerPrefix = "blk.";

// Splits "<prefix>N.<rest>" into the layer number text and rest; false when `name` is not so.
bool SplitLayer(std::string_view name, std::string_view prefix, std::string_view* layer,
                std::string_view* rest) {
  if (!name.starts_with(prefix)) return false;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  for (char c : name.substr(0, dot)) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  *layer = name.substr(0, dot);
  *rest = name.substr(dot + 1);
  return true;
}

// Maps `name` from one side of the tables to the other (`to_gguf` picks the direction).
std::optional<std::string> Map(std::string_view name, bool to_gguf) {
  for (const NamePair& pair : kGlobalNames) {
    if ((to_gguf ? pair.hf : pair.gguf) == name) return std::string(to_gguf ? pair.gguf : pair.hf);
  }
  std::string_view layer;
  std::string_view rest;
  if (!SplitLayer(name, to_gguf ? kHfLayerPrefix : kGgufLayerPrefix, &layer, &rest)) {
    return std::nullopt;
  }
  for (const NamePair& pair : kLayerNames) {
    if ((to_gguf ? pair.hf : pair.gguf) != rest) continue;
    std::string out(to_gguf ? kGgufLayerPrefix : kHfLayerPrefix);
    out.append(layer).append(".").append(to_gguf ? pair.gguf : pair.hf);
    return out;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> GgufTensorName(std::string_view hf_name) { return Map(hf_name, true); }

std::optional<std::string> HfTensorName(std::string_view gguf_name) {
  return Map(gguf_name, false);
}

bool IsRecomputedHfTensor(std::string_view hf_name) {
  return hf_name.ends_with(".rotary_emb.inv_freq");
}

}  // namespace tessera::safetensors
