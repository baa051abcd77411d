#include "common/model/model_config.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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
  absl::StatusOr<std::string> arch = file.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  config.architecture = *arch;
  config.name = file.GetString("general.name").value_or("");
  const std::string p = config.architecture + ".";

#define TESSERA_ASSIGN_OR_RETURN_INT(field, ...)                    \
  {                                                                 \
    absl::StatusOr<int> value = ReadPositiveInt(file, __VA_ARGS__); \
    if (!value.ok()) return value.status();                         \
    config.field = *value;                                          \
  }
  TESSERA_ASSIGN_OR_RETURN_INT(num_layers, p + "block_count");
  TESSERA_ASSIGN_OR_RETURN_INT(hidden_size, p + "embedding_length");
  TESSERA_ASSIGN_OR_RETURN_INT(ffn_size, p + "feed_forward_length");
  TESSERA_ASSIGN_OR_RETURN_INT(num_heads, p + "attention.head_count");
  TESSERA_ASSIGN_OR_RETURN_INT(num_kv_heads, p + "attention.head_count_kv", config.num_heads);
  TESSERA_ASSIGN_OR_RETURN_INT(head_dim, p + "attention.key_length",
                               config.hidden_size / config.num_heads);
  TESSERA_ASSIGN_OR_RETURN_INT(rope_dim, p + "rope.dimension_count", config.head_dim);
  TESSERA_ASSIGN_OR_RETURN_INT(context_length, p + "context_length");
  TESSERA_ASSIGN_OR_RETURN_INT(vocab_size, p + "vocab_size", VocabSizeFromTokenizer(file));
#undef TESSERA_ASSIGN_OR_RETURN_INT

  absl::StatusOr<double> theta = ReadPositiveFloat(file, p + "rope.freq_base", 10000.0);
  if (!theta.ok()) return theta.status();
  config.rope_theta = *theta;
  absl::StatusOr<double> eps =
      ReadPositiveFloat(file, p + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!eps.ok()) return eps.status();
  config.rms_norm_eps = *eps;
  config.tied_embeddings = file.FindTensor("output.weight") == nullptr;

  if (absl::Status status = CheckHeadGeometry(config); !status.ok()) return status;
  return config;
}

}  // namespace tessera::model
