#include "common/safetensors/hf_tokenizer_metadata.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/tokenizer/bpe_spec.h"
#include "common/tokenizer/hf_tokenizer_json_loader.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/util/status_macros.h"

namespace tessera::safetensors {
namespace {

using Json = nlohmann::json;

constexpr char kTokenizerFile[] = "tokenizer.json";
constexpr char kTokenizerConfigFile[] = "tokenizer_config.json";
constexpr char kChatTemplateFile[] = "chat_template.jinja";

// The GGUF pre-tokenizers a tokenizer.json can be (llama.cpp's names for these vocabularies).
constexpr const char* kGgufPreTokenizers[] = {"smollm", "gpt2", "llama3", "dbrx", "qwen2"};
// HF spells the contractions of the Llama 3 / Qwen2 regexes case-insensitively; llama.cpp's
// copies spell each case out. The same split on every contraction they list.
constexpr char kHfContractions[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
constexpr char kGgufContractions[] = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";

// Names the GGUF pre-tokenizer that splits with the spec's regexes and merges as the spec does,
// so the GGUF keys tokenize as the twin a converter would write (see the header).
absl::Status NameGgufPreTokenizer(tokenizer::BpeSpec* spec) {
  std::vector<std::string> regexes = spec->pre_regexes;
  for (std::string& regex : regexes) {
    absl::StrReplaceAll({{kHfContractions, kGgufContractions}}, &regex);
  }
  for (const char* name : kGgufPreTokenizers) {
    absl::StatusOr<tokenizer::PreTokenizerConfig> config = tokenizer::LookupPreTokenizer(name);
    if (config.ok() && config->regexes == regexes && config->ignore_merges == spec->ignore_merges) {
      spec->pre_tokenizer = name;
      return absl::OkStatus();
    }
  }
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.json: its pre-tokenizer (with ignore_merges ",
                   spec->ignore_merges ? "true" : "false", ") is none that GGUF names (",
                   absl::StrJoin(kGgufPreTokenizers, ", "), ")"));
}

absl::Status CheckUnknownBytes(const tokenizer::BpeSpec& spec) {
  if (spec.unknown_bytes_to_unk) {
    return absl::UnimplementedError(
        "tokenizer.json: model.unk_token is set (GGUF cannot say that unknown bytes become it)");
  }
  return absl::OkStatus();
}

absl::Status PadToVocabSize(int vocab_size, tokenizer::BpeSpec* spec) {
  if (spec->tokens.size() > static_cast<size_t>(vocab_size)) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json has ", spec->tokens.size(),
                                                   " tokens, more than config.json's vocab_size ",
                                                   vocab_size));
  }
  for (size_t id = spec->tokens.size(); id < static_cast<size_t>(vocab_size); ++id) {
    spec->tokens.push_back(absl::StrCat("[PAD", id, "]"));
    spec->token_types.push_back(tokenizer::TokenType::kUnused);
  }
  return absl::OkStatus();
}

// `says_add_bos`: tokenizer_config.json has add_bos_token. Without it the key is left out, so the
// GGUF pre-tokenizer's default applies (true for llama3, whose BOS HF adds in its post-processor),
// as in the GGUF conversion.
void AddSpec(tokenizer::BpeSpec spec, bool says_add_bos, MetadataList* metadata) {
  metadata->AddString("tokenizer.ggml.model", spec.model);
  metadata->AddString("tokenizer.ggml.pre", spec.pre_tokenizer);
  std::vector<int32_t> types;
  types.reserve(spec.token_types.size());
  for (tokenizer::TokenType type : spec.token_types) types.push_back(static_cast<int32_t>(type));
  metadata->AddStringArray("tokenizer.ggml.tokens", std::move(spec.tokens));
  metadata->AddInt32Array("tokenizer.ggml.token_type", types);
  metadata->AddStringArray("tokenizer.ggml.merges", std::move(spec.merges));
  for (auto [key, id] : {std::pair{"tokenizer.ggml.bos_token_id", spec.bos_id},
                         std::pair{"tokenizer.ggml.eos_token_id", spec.eos_id},
                         std::pair{"tokenizer.ggml.padding_token_id", spec.pad_id},
                         std::pair{"tokenizer.ggml.unknown_token_id", spec.unk_id}}) {
    if (id >= 0) metadata->AddUint32(key, static_cast<uint32_t>(id));
  }
  if (says_add_bos) metadata->AddBool("tokenizer.ggml.add_bos_token", spec.add_bos);
  metadata->AddBool("tokenizer.ggml.add_eos_token", spec.add_eos);
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template}.
std::optional<std::string> ConfigChatTemplate(const std::optional<Json>& config) {
  if (!config || !config->contains("chat_template")) return std::nullopt;
  const Json& value = (*config)["chat_template"];
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) return std::nullopt;
  for (const Json& entry : value) {
    if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
        entry["template"].is_string()) {
      return entry["template"].get<std::string>();
    }
  }
  return std::nullopt;
}

absl::Status AddChatTemplate(const HfDirectory& dir, const std::optional<Json>& config,
                             MetadataList* metadata) {
  std::optional<std::string> source = ConfigChatTemplate(config);
  if (!source) {
    TESSERA_ASSIGN_OR_RETURN(source, dir.ReadOptionalFile(kChatTemplateFile));
  }
  if (source) metadata->AddString("tokenizer.chat_template", *std::move(source));
  return absl::OkStatus();
}

}  // namespace

absl::Status AddHfTokenizerMetadata(const HfDirectory& dir, int vocab_size,
                                    MetadataList* metadata) {
  TESSERA_ASSIGN_OR_RETURN(const std::optional<std::string> json,
                           dir.ReadOptionalFile(kTokenizerFile));
  if (!json) {
    return absl::NotFoundError(absl::StrCat("'", dir.path(), "' has no ", kTokenizerFile));
  }
  TESSERA_ASSIGN_OR_RETURN(const std::optional<Json> config,
                           dir.ReadOptionalJson(kTokenizerConfigFile));
  absl::StatusOr<tokenizer::BpeSpec> spec =
      tokenizer::ParseHfTokenizerJson(*json, config ? config->dump() : "");
  absl::Status status = spec.status();
  if (status.ok()) status = NameGgufPreTokenizer(&*spec);
  if (status.ok()) status = CheckUnknownBytes(*spec);
  if (status.ok()) status = PadToVocabSize(vocab_size, &*spec);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(dir.path(), ": ", status.message()));
  }
  AddSpec(*std::move(spec), config && config->contains("add_bos_token"), metadata);
  return AddChatTemplate(dir, config, metadata);
}

}  // namespace tessera::safetensors
