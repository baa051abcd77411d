#include "common/model/model_config.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"

namespace tessera::model {
namespace {

// Reads a positive int key; `fallback` (when > 0) is used if the key is absent.
absl::StatusOr<int> ReadPositiveInt(const gguf::GgufFile& file, const std::string& key,
                                    int fallback = 0) {
  if (!file.HasKey(key)) {
    if (fallback > 0) return fallback;
    return absl::InvalidArgumentError(absl::StrCat("model metadata is missing '", key, "'"));
  }
  absl::StatusOr<int64_t> value = file.GetInt(key);
  if (!value.ok()) return value.status();
  if (*value <= 0 || *value > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model metadata '", key, "' = ", *value, " is out of range"));
  }
  return static_cast<int>(*value);
}

absl::StatusOr<double> ReadPositiveFloat(const gguf::GgufFile& file, const std::string& key,
                                         double fallback) {
  if (!file.HasKey(key)) return fallback;
  absl::StatusOr<double> value = file.GetFloat(key);
  if (!value.ok()) return value.status();
  if (!(*value > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model metadata '", key, "' = ", *value, " must be positive"));
  }
  return *value;
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

absl::StatusOr<ModelConfig> ReadModelConfig(const gguf::GgufFile& file) {
  ModelConfig config;
  TESSERA_ASSIGN_OR_RETURN(config.architecture, file.GetString("general.architecture"));
  config.name = file.GetString("general.name").value_or("");
  const std::string p = config.architecture + ".";

  TESSERA_ASSIGN_OR_RETURN(config.num_layers, ReadPositiveInt(file, p + "block_count"));
  TESSERA_ASSIGN_OR_RETURN(config.hidden_size, ReadPositiveInt(file, p + "embedding_length"));
  TESSERA_ASSIGN_OR_RETURN(config.ffn_size, ReadPositiveInt(file, p + "feed_forward_length"));
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
  TESSERA_ASSIGN_OR_RETURN(config.rms_norm_eps,
                           ReadPositiveFloat(file, p + "attention.layer_norm_rms_epsilon", 1e-5));
  config.tied_embeddings = file.FindTensor("output.weight") == nullptr;

  if (absl::Status status = CheckHeadGeometry(config); !status.ok()) return status;
  return config;
}

}  // namespace tessera::model
