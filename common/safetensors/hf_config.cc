#include "common/safetensors/hf_config.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/model_config.h"
#include "common/util/status_macros.h"

namespace tessera::safetensors {
namespace {

using Json = nlohmann::json;

struct ArchitectureName {
  const char* hf;
  const char* gguf;
};
constexpr ArchitectureName kArchitectures[] = {
    {"LlamaForCausalLM", "llama"}, {"Qwen2ForCausalLM", "qwen2"}, {"Qwen3ForCausalLM", "qwen3"}};

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("config.json: ", std::string(what)));
}

bool Present(const Json& node, const char* key) {
  return node.contains(key) && !node[key].is_null();
}

absl::StatusOr<int> PositiveInt(const Json& node, const char* key) {
  if (!Present(node, key)) return Invalid(absl::StrCat("'", key, "' is missing"));
  const Json& value = node[key];
  if (!value.is_number_integer() || value.get<int64_t>() <= 0 ||
      value.get<int64_t>() > std::numeric_limits<int>::max()) {
    return Invalid(absl::StrCat("'", key, "' = ", value.dump(), " is not a positive integer"));
  }
  return value.get<int>();
}

absl::StatusOr<double> PositiveNumber(const Json& node, const char* key, double fallback) {
  if (!Present(node, key)) return fallback;
  const Json& value = node[key];
  if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>())) {
    return Invalid(absl::StrCat("'", key, "' = ", value.dump(), " is not a positive number"));
  }
  return value.get<double>();
}

absl::StatusOr<ArchitectureName> ReadArchitecture(const Json& config) {
  if (!config.contains("architectures") || !config["architectures"].is_array() ||
      config["architectures"].empty() || !config["architectures"][0].is_string()) {
    return Invalid("'architectures' is not a list of class names");
  }
  const std::string name = config["architectures"][0].get<std::string>();
  std::vector<std::string> supported;
  for (const ArchitectureName& arch : kArchitectures) {
    if (name == arch.hf) return arch;
    supported.emplace_back(arch.hf);
  }
  return absl::UnimplementedError(
      absl::StrCat("config.json: architectures[0] '", name,
                   "' is not supported (supported: ", absl::StrJoin(supported, ", "), ")"));
}

// Options of these architectures that change the computation and that we do not run.
absl::Status CheckUnsupportedOptions(const Json& config) {
  if (Present(config, "hidden_act") && config["hidden_act"] != "silu") {
    return absl::UnimplementedError(absl::StrCat(
        "config.json: hidden_act ", config["hidden_act"].dump(), " is not supported (only silu)"));
  }
  if (config.value("use_sliding_window", false) == true) {
    return absl::UnimplementedError("config.json: use_sliding_window true is not supported");
  }
  return absl::OkStatus();
}

// The rope_scaling (or rope_parameters) object, nullptr for none.
const Json* RopeParameters(const Json& config) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (Present(config, key) && config[key].is_object()) return &config[key];
  }
  return nullptr;
}

absl::Status CheckRopeKeys(const Json& rope, const std::string& type,
                           const std::set<std::string>& allowed) {
  for (const auto& [key, value] : rope.items()) {
    if (key == "rope_type" || key == "type" || key == "rope_theta" || allowed.contains(key)) {
      continue;
    }
    return absl::UnimplementedError(absl::StrCat("config.json: rope scaling key '", key,
                                                 "' of type ", type, " cannot be represented"));
  }
  return absl::OkStatus();
}

// llama.cpp's converter (LlamaModel.generate_extra_tensors): each pair's divisor of its frequency.
absl::StatusOr<std::vector<float>> Llama3RopeFreqs(const Json& rope, int head_dim, double theta) {
  TESSERA_ASSIGN_OR_RETURN(const double factor, PositiveNumber(rope, "factor", 8.0));
  TESSERA_ASSIGN_OR_RETURN(const double low, PositiveNumber(rope, "low_freq_factor", 1.0));
  TESSERA_ASSIGN_OR_RETURN(const double high, PositiveNumber(rope, "high_freq_factor", 4.0));
  TESSERA_ASSIGN_OR_RETURN(const double old_context,
                           PositiveNumber(rope, "original_max_position_embeddings", 8192.0));
  if (low == high) return Invalid("llama3 rope scaling needs low_freq_factor != high_freq_factor");
  const double low_wavelen = old_context / low;
  const double high_wavelen = old_context / high;
  std::vector<float> divisors;
  for (int i = 0; i < head_dim / 2; ++i) {
    const float freq = 1.0f / std::pow(static_cast<float>(theta), 2.0f * i / head_dim);
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_wavelen) {
      divisors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      divisors.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_context / wavelen - low) / (high - low);
      divisors.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
    }
  }
  return divisors;
}

absl::Status AddYarn(const Json& rope, const std::string& p, MetadataList* metadata) {
  const std::set<std::string> allowed = {"factor",           "original_max_position_embeddings",
                                         "attention_factor", "attn_factor",
                                         "beta_fast",        "beta_slow"};
  TESSERA_RETURN_IF_ERROR(CheckRopeKeys(rope, "yarn", allowed));
  TESSERA_ASSIGN_OR_RETURN(const double factor, PositiveNumber(rope, "factor", 0.0));
  if (factor == 0.0) return Invalid("yarn rope scaling has no factor");
  TESSERA_ASSIGN_OR_RETURN(const int original,
                           PositiveInt(rope, "original_max_position_embeddings"));
  metadata->AddString(p + "rope.scaling.type", "yarn");
  metadata->AddFloat32(p + "rope.scaling.factor", static_cast<float>(factor));
  metadata->AddUint32(p + "rope.scaling.original_context_length", original);
  for (auto [hf_key, gguf_key] : {std::pair{"attention_factor", "rope.scaling.attn_factor"},
                                  std::pair{"attn_factor", "rope.scaling.attn_factor"},
                                  std::pair{"beta_fast", "rope.scaling.yarn_beta_fast"},
                                  std::pair{"beta_slow", "rope.scaling.yarn_beta_slow"}}) {
    if (!Present(rope, hf_key) || metadata->Has(p + gguf_key)) continue;
    TESSERA_ASSIGN_OR_RETURN(const double value, PositiveNumber(rope, hf_key, 1.0));
    metadata->AddFloat32(p + gguf_key, static_cast<float>(value));
  }
  return absl::OkStatus();
}

absl::Status AddRopeScaling(const Json& config, const std::string& p, int head_dim, double theta,
                            MetadataList* metadata, HfModelConfig* out) {
  const Json* rope = RopeParameters(config);
  if (rope == nullptr) return absl::OkStatus();
  const std::string type = rope->value("rope_type", rope->value("type", std::string("default")));
  if (type == "default") return absl::OkStatus();
  if (type == "linear") {
    TESSERA_RETURN_IF_ERROR(CheckRopeKeys(*rope, type, std::set<std::string>{"factor"}));
    TESSERA_ASSIGN_OR_RETURN(const double factor, PositiveNumber(*rope, "factor", 1.0));
    metadata->AddString(p + "rope.scaling.type", "linear");
    metadata->AddFloat32(p + "rope.scaling.factor", static_cast<float>(factor));
    return absl::OkStatus();
  }
  if (type == "yarn") return AddYarn(*rope, p, metadata);
  if (type == "llama3") {
    const std::set<std::string> allowed = {"factor", "low_freq_factor", "high_freq_factor",
                                           "original_max_position_embeddings"};
    TESSERA_RETURN_IF_ERROR(CheckRopeKeys(*rope, type, allowed));
    TESSERA_ASSIGN_OR_RETURN(out->rope_freqs, Llama3RopeFreqs(*rope, head_dim, theta));
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("config.json: rope scaling type '", type,
                                               "' is not supported (supported: linear, yarn, "
                                               "llama3)"));
}

}  // namespace

absl::StatusOr<HfModelConfig> ReadHfModelConfig(const Json& config, MetadataList* metadata) {
  HfModelConfig out;
  TESSERA_ASSIGN_OR_RETURN(const ArchitectureName arch, ReadArchitecture(config));
  TESSERA_RETURN_IF_ERROR(CheckUnsupportedOptions(config));
  out.hf_architecture = arch.hf;
  out.architecture = arch.gguf;
  const std::string p = out.architecture + ".";
  metadata->AddString("general.architecture", out.architecture);
  for (auto [hf_key, gguf_key] :
       {std::pair{"max_position_embeddings", "context_length"},
        std::pair{"hidden_size", "embedding_length"}, std::pair{"num_hidden_layers", "block_count"},
        std::pair{"intermediate_size", "feed_forward_length"},
        std::pair{"num_attention_heads", "attention.head_count"},
        std::pair{"vocab_size", "vocab_size"}}) {
    TESSERA_ASSIGN_OR_RETURN(const int value, PositiveInt(config, hf_key));
    metadata->AddUint32(p + gguf_key, value);
  }
  TESSERA_ASSIGN_OR_RETURN(out.vocab_size, PositiveInt(config, "vocab_size"));
  TESSERA_ASSIGN_OR_RETURN(const int heads, PositiveInt(config, "num_attention_heads"));
  TESSERA_ASSIGN_OR_RETURN(const int hidden, PositiveInt(config, "hidden_size"));
  int kv_heads = heads;
  if (Present(config, "num_key_value_heads")) {
    TESSERA_ASSIGN_OR_RETURN(kv_heads, PositiveInt(config, "num_key_value_heads"));
  }
  metadata->AddUint32(p + "attention.head_count_kv", kv_heads);
  int head_dim = hidden / heads;
  if (Present(config, "head_dim")) {
    TESSERA_ASSIGN_OR_RETURN(head_dim, PositiveInt(config, "head_dim"));
    metadata->AddUint32(p + "attention.key_length", head_dim);
    metadata->AddUint32(p + "attention.value_length", head_dim);
  }
  TESSERA_ASSIGN_OR_RETURN(const double eps, PositiveNumber(config, "rms_norm_eps", 1e-6));
  metadata->AddFloat32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(eps));
  const Json* rope = RopeParameters(config);
  TESSERA_ASSIGN_OR_RETURN(double theta, PositiveNumber(config, "rope_theta", 10000.0));
  if (rope != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(theta, PositiveNumber(*rope, "rope_theta", theta));
  }
  metadata->AddFloat32(p + "rope.freq_base", static_cast<float>(theta));
  TESSERA_RETURN_IF_ERROR(AddRopeScaling(config, p, head_dim, theta, metadata, &out));
  if (Present(config, "tie_word_embeddings")) {
    if (!config["tie_word_embeddings"].is_boolean()) {
      return Invalid("'tie_word_embeddings' is not a bool");
    }
    out.tie_word_embeddings = config["tie_word_embeddings"].get<bool>();
  }
  if (out.architecture == "llama") metadata->AddBool(std::string(model::kRopeNeoxKey), true);
  return out;
}

}  // namespace tessera::safetensors
