#include "common/model/model_config.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/model/hybrid_config.h"
#include "common/model/metadata_reader.h"
#include "common/util/status_macros.h"

namespace tessera::model {
namespace {

absl::StatusOr<RopeScalingType> ReadRopeScalingType(const gguf::GgufFile& file,
                                                    const std::string& key) {
  absl::StatusOr<std::string> name = file.GetString(key);
  if (!name.ok()) return name.status();
  for (RopeScalingType type :
       {RopeScalingType::kNone, RopeScalingType::kLinear, RopeScalingType::kYarn}) {
    if (*name == RopeScalingTypeName(type)) return type;
  }
  return absl::InvalidArgumentError(absl::StrCat("model metadata '", key, "' = '", *name,
                                                 "' is not supported (supported: none, linear, "
                                                 "yarn)"));
}

// llama.cpp's reading of the scaling keys (llama_model::load_hparams and the llama_context
// defaults): an absent type means "linear", which with an absent factor is no scaling; the
// factor comes from rope.scaling.factor, else the older rope.scale_linear; "none" ignores it.
absl::StatusOr<RopeScaling> ReadRopeScaling(const gguf::GgufFile& file, const std::string& p,
                                            int context_length) {
  RopeScaling s;
  const std::string factor_key = file.HasKey(p + "rope.scaling.factor")
                                     ? p + "rope.scaling.factor"
                                     : p + "rope.scale_linear";
  TESSERA_ASSIGN_OR_RETURN(s.factor, ReadPositiveFloat(file, factor_key, 1.0));
  if (file.HasKey(p + "rope.scaling.type")) {
    TESSERA_ASSIGN_OR_RETURN(s.type, ReadRopeScalingType(file, p + "rope.scaling.type"));
  } else {
    s.type = s.factor != 1.0 ? RopeScalingType::kLinear : RopeScalingType::kNone;
  }
  if (s.type == RopeScalingType::kNone) s.factor = 1.0;
  // The kernels use the factor as f32 and invert it: both must stay finite and non-zero.
  const float factor_f32 = static_cast<float>(s.factor);
  if (!std::isfinite(factor_f32) || factor_f32 <= 0.0f || !std::isfinite(1.0f / factor_f32)) {
    return absl::InvalidArgumentError(absl::StrCat("model metadata '", factor_key, "' = ",
                                                   s.factor, " is out of the float32 range"));
  }
  TESSERA_ASSIGN_OR_RETURN(
      s.original_context_length,
      ReadPositiveInt(file, p + "rope.scaling.original_context_length", context_length));
  TESSERA_ASSIGN_OR_RETURN(s.attn_factor,
                           ReadPositiveFloat(file, p + "rope.scaling.attn_factor", 1.0));
  TESSERA_ASSIGN_OR_RETURN(s.yarn_beta_fast,
                           ReadPositiveFloat(file, p + "rope.scaling.yarn_beta_fast", 32.0));
  TESSERA_ASSIGN_OR_RETURN(s.yarn_beta_slow,
                           ReadPositiveFloat(file, p + "rope.scaling.yarn_beta_slow", 1.0));
  return s;
}

// The RoPE kernels rotate pairs of a head's leading dimensions, and YaRN divides by ln(theta).
absl::Status CheckRopeGeometry(const ModelConfig& config, const std::string& p) {
  if (config.rope_dim % 2 != 0 || config.rope_dim > config.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat("model metadata '", p,
                                                   "rope.dimension_count' = ", config.rope_dim,
                                                   " must be even and at most the head dim ",
                                                   config.head_dim));
  }
  if (config.rope_scaling.type == RopeScalingType::kYarn && config.rope_theta == 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model metadata '", p, "rope.freq_base' = 1 is invalid with YaRN scaling"));
  }
  return absl::OkStatus();
}

absl::Status CheckHeadGeometry(const ModelConfig& config) {
  if (config.hidden_size % config.num_heads != 0 && config.head_dim == 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_count ", config.num_heads,
                                                   " does not divide embedding_length ",
                                                   config.hidden_size));
  }
  if (config.num_heads % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_count_kv ", config.num_kv_heads,
                                                   " does not divide head_count ",
                                                   config.num_heads));
  }
  return absl::OkStatus();
}

int VocabSizeFromTokenizer(const gguf::GgufFile& file) {
  const gguf::GgufValue* tokens = file.FindMetadata("tokenizer.ggml.tokens");
  if (tokens == nullptr) return 0;
  const gguf::GgufArray* array = tokens->GetIf<gguf::GgufArray>();
  return array == nullptr ? 0 : static_cast<int>(array->elements.size());
}

}  // namespace

bool ArchitectureUsesNeoxRope(std::string_view architecture) {
  // The Qwen entries of llama.cpp's LLAMA_ROPE_TYPE_NEOX list (the family DESIGN.md §5 targets;
  // the MoE and hybrid ones are listed ahead of their loaders so the mode is never forgotten).
  static constexpr std::string_view kNeoxArchitectures[] = {
      "qwen2", "qwen2moe", "qwen3", "qwen3moe", "qwen3next", "qwen35", "qwen35moe"};
  for (std::string_view neox : kNeoxArchitectures) {
    if (architecture == neox) return true;
  }
  return false;
}

std::string_view RopeScalingTypeName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kYarn:
      return "yarn";
  }
  return "unknown";
}

absl::StatusOr<ModelConfig> ReadModelConfig(const gguf::GgufFile& file) {
  ModelConfig config;
  TESSERA_ASSIGN_OR_RETURN(config.architecture, file.GetString("general.architecture"));
  config.name = file.GetString("general.name").value_or("");
  const std::string p = config.architecture + ".";

  TESSERA_ASSIGN_OR_RETURN(config.num_layers, ReadPositiveInt(file, p + "block_count"));
  TESSERA_ASSIGN_OR_RETURN(config.hidden_size, ReadPositiveInt(file, p + "embedding_length"));
  // The MoE hybrids' FFNs are experts: llama.cpp reads feed_forward_length optionally for them
  // (converters write it only when the HF config has an intermediate_size).
  TESSERA_ASSIGN_OR_RETURN(config.ffn_size,
                           HybridArchitectureHasExperts(config.architecture)
                               ? ReadOptionalPositiveInt(file, p + "feed_forward_length")
                               : ReadPositiveInt(file, p + "feed_forward_length"));
  TESSERA_ASSIGN_OR_RETURN(config.num_heads, ReadPositiveInt(file, p + "attention.head_count"));
  TESSERA_ASSIGN_OR_RETURN(config.num_kv_heads,
                           ReadPositiveInt(file, p + "attention.head_count_kv", config.num_heads));
  TESSERA_ASSIGN_OR_RETURN(config.head_dim,
                           ReadPositiveInt(file, p + "attention.key_length",
                                           config.hidden_size / config.num_heads));
  TESSERA_ASSIGN_OR_RETURN(config.rope_dim,
                           ReadPositiveInt(file, p + "rope.dimension_count", config.head_dim));
  TESSERA_ASSIGN_OR_RETURN(config.context_length, ReadPositiveInt(file, p + "context_length"));
  TESSERA_ASSIGN_OR_RETURN(config.vocab_size, ReadPositiveInt(file, p + "vocab_size",
                                                              VocabSizeFromTokenizer(file)));
  TESSERA_ASSIGN_OR_RETURN(config.rope_theta,
                           ReadPositiveFloat(file, p + "rope.freq_base", 10000.0));
  TESSERA_ASSIGN_OR_RETURN(config.rope_scaling,
                           ReadRopeScaling(file, p, config.context_length));
  TESSERA_ASSIGN_OR_RETURN(config.rms_norm_eps,
                           ReadPositiveFloat(file, p + "attention.layer_norm_rms_epsilon", 1e-5));
  config.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  config.rope_neox = ArchitectureUsesNeoxRope(config.architecture);
  if (file.HasKey(kRopeNeoxKey)) {
    TESSERA_ASSIGN_OR_RETURN(config.rope_neox, file.GetBool(kRopeNeoxKey));
  }

  if (absl::Status status = CheckHeadGeometry(config); !status.ok()) return status;
  if (absl::Status status = CheckRopeGeometry(config, p); !status.ok()) return status;
  if (IsHybridArchitecture(config.architecture)) {
    TESSERA_ASSIGN_OR_RETURN(config.hybrid, ReadHybridLayout(file, config));
    config.num_layers = static_cast<int>(config.hybrid->layer_kinds.size());
  }
  return config;
}

}  // namespace tessera::model
