#include "common/tokenizer/hf_tokenizer_json_loader.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/tokenizer/bpe_tokenizer.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/util/absl_compat.h"
#include "common/util/client_json.h"
#include "nlohmann/json.hpp"

namespace tessera::tokenizer {
namespace {

using Json = nlohmann::json;

absl::Status Unsupported(std::string_view what, const Json& node) {
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.json: unsupported ", util::ToAbsl(what), ": ", node.dump().substr(0, 200)));
}

bool IsNullOrFalse(const Json& node, const char* key) {
  return !node.contains(key) || node[key].is_null() || node[key] == false;
}

bool IsNullOrEmpty(const Json& node, const char* key) {
  return !node.contains(key) || node[key].is_null() || node[key] == "";
}

// A literal pattern as a regex: escape ASCII punctuation (PCRE2 treats "\<non-alnum>" as the
// literal character; \Q..\E would hide `\s` from WidenWhitespaceClass, which is harmless but odd).
std::string EscapeLiteral(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x80 && !std::isalnum(static_cast<unsigned char>(c))) {
      out += '\\';
    }
    out += c;
  }
  return out;
}

struct PreTokenizerStages {
  std::vector<std::string> regexes;
  bool byte_level_seen = false;
};

absl::Status AppendStage(const Json& node, PreTokenizerStages* stages) {
  const std::string type = node.value("type", "");
  if (stages->byte_level_seen) return Unsupported("pre_tokenizer stage after ByteLevel", node);
  if (type == "Sequence") {
    for (const Json& child : node.at("pretokenizers")) {
      if (absl::Status status = AppendStage(child, stages); !status.ok()) return status;
    }
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    if (node.value("add_prefix_space", false)) {
      return Unsupported("ByteLevel pre_tokenizer with add_prefix_space", node);
    }
    if (node.value("use_regex", true)) stages->regexes.emplace_back(kGpt2SplitRegex);
    stages->byte_level_seen = true;
    return absl::OkStatus();
  }
  if (type == "Digits") {
    stages->regexes.emplace_back(node.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    return absl::OkStatus();
  }
  if (type == "Split") {
    if (node.value("behavior", "") != "Isolated" || node.value("invert", false)) {
      return Unsupported("Split pre_tokenizer (only behavior Isolated, invert false)", node);
    }
    const Json& pattern = node.at("pattern");
    if (pattern.contains("Regex")) {
      stages->regexes.push_back(pattern["Regex"].get<std::string>());
    } else if (pattern.contains("String")) {
      stages->regexes.push_back(EscapeLiteral(pattern["String"].get<std::string>()));
    } else {
      return Unsupported("Split pattern", pattern);
    }
    return absl::OkStatus();
  }
  return Unsupported(absl::StrCat("pre_tokenizer type '", type, "'"), node);
}

// Names the shape after the GGUF pre-tokenizer with the same regexes, when there is one.
std::string NameFor(const std::vector<std::string>& regexes) {
  for (const char* name : {"smollm", "gpt2", "llama3", "qwen2"}) {
    absl::StatusOr<PreTokenizerConfig> config = LookupPreTokenizer(name);
    if (config.ok() && config->regexes == regexes) return name;
  }
  return "hf-custom";
}

absl::Status ReadPipeline(const Json& root, BpeSpec* spec) {
  if (root.contains("normalizer") && !root["normalizer"].is_null()) {
    return Unsupported("normalizer", root["normalizer"]);
  }
  if (!root.contains("pre_tokenizer") || root["pre_tokenizer"].is_null()) {
    return absl::UnimplementedError("tokenizer.json: no pre_tokenizer (ByteLevel is required)");
  }
  PreTokenizerStages stages;
  if (absl::Status status = AppendStage(root["pre_tokenizer"], &stages); !status.ok()) {
    return status;
  }
  if (!stages.byte_level_seen) {
    return Unsupported("pre_tokenizer without ByteLevel", root["pre_tokenizer"]);
  }
  spec->pre_tokenizer = NameFor(stages.regexes);
  spec->pre_regexes = std::move(stages.regexes);
  const Json decoder = root.value("decoder", Json());
  if (decoder.is_null() || decoder.value("type", "") != "ByteLevel") {
    return Unsupported("decoder (only ByteLevel)", decoder);
  }
  return absl::OkStatus();
}

// Places (id, text, type) into the spec's parallel arrays, growing them; rejects two different
// texts for one id. Ids are dense, so none can reach `num_entries` (this also bounds memory for
// a hostile file).
absl::Status PlaceToken(int64_t id, const std::string& text, TokenType type, size_t num_entries,
                        std::vector<std::optional<std::string>>* texts, BpeSpec* spec) {
  if (id < 0 || static_cast<uint64_t>(id) >= num_entries) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: token '", text, "' has id ", id,
                                                   " (ids must be contiguous from 0)"));
  }
  if (static_cast<size_t>(id) >= texts->size()) {
    texts->resize(id + 1);
    spec->token_types.resize(id + 1, TokenType::kNormal);
  }
  auto& slot = (*texts)[id];
  if (slot && *slot != text) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.json: id ", id, " is both '", *slot, "' and '", text, "'"));
  }
  slot = text;
  spec->token_types[id] = type;
  return absl::OkStatus();
}

absl::Status CheckModelOptions(const Json& model) {
  if (model.value("type", "BPE") != "BPE") {
    return Unsupported("model type", model.value("type", Json()));
  }
  if (!IsNullOrFalse(model, "byte_fallback") ||
      !IsNullOrEmpty(model, "continuing_subword_prefix") ||
      !IsNullOrEmpty(model, "end_of_word_suffix") ||
      (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0)) {
    return Unsupported("BPE options (byte_fallback, subword prefix/suffix or dropout)",
                       model.value("type", Json()));
  }
  return absl::OkStatus();
}

absl::Status ReadVocab(const Json& root, BpeSpec* spec) {
  const Json& model = root.at("model");
  if (absl::Status status = CheckModelOptions(model); !status.ok()) return status;
  spec->ignore_merges = model.value("ignore_merges", false);
  const Json& vocab = model.at("vocab");
  const Json added_tokens = root.value("added_tokens", Json::array());
  const size_t num_entries = vocab.size() + added_tokens.size();
  std::vector<std::optional<std::string>> texts;
  for (const auto& [text, id] : vocab.items()) {
    absl::Status status =
        PlaceToken(id.get<int64_t>(), text, TokenType::kNormal, num_entries, &texts, spec);
    if (!status.ok()) return status;
  }
  for (const Json& added : added_tokens) {
    const std::string content = added.at("content").get<std::string>();
    if (added.value("lstrip", false) || added.value("rstrip", false) ||
        added.value("single_word", false)) {
      return Unsupported(
          absl::StrCat("added token '", content, "' options (lstrip/rstrip/single_word)"), added);
    }
    const TokenType type =
        added.value("special", false) ? TokenType::kControl : TokenType::kUserDefined;
    absl::Status status =
        PlaceToken(added.at("id").get<int64_t>(), content, type, num_entries, &texts, spec);
    if (!status.ok()) return status;
  }
  spec->tokens.reserve(texts.size());
  for (size_t id = 0; id < texts.size(); ++id) {
    if (!texts[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json: no token has id ", id, " (ids must be contiguous)"));
    }
    spec->tokens.push_back(std::move(*texts[id]));
  }
  return absl::OkStatus();
}

absl::Status ReadMerges(const Json& model, BpeSpec* spec) {
  for (const Json& merge : model.at("merges")) {
    if (merge.is_string()) {
      spec->merges.push_back(merge.get<std::string>());
    } else if (merge.is_array() && merge.size() == 2) {
      const auto left = merge[0].get<std::string>();
      const auto right = merge[1].get<std::string>();
      if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokenizer.json: merge ", merge.dump(), " has a space inside a token"));
      }
      spec->merges.push_back(absl::StrCat(left, " ", right));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json: malformed merge ", merge.dump()));
    }
  }
  return absl::OkStatus();
}

std::optional<TokenId> FindId(const BpeSpec& spec, std::string_view text) {
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.tokens[id] == text) return static_cast<TokenId>(id);
  }
  return std::nullopt;
}

// A special token named in tokenizer_config.json / model.unk_token: a string or {"content": ...}.
absl::Status ReadNamedToken(const Json& node, const char* key, BpeSpec* spec, TokenId* id) {
  if (!node.contains(key) || node[key].is_null()) return absl::OkStatus();
  const Json& value = node[key];
  const std::string text =
      value.is_object() ? value.at("content").get<std::string>() : value.get<std::string>();
  std::optional<TokenId> found = FindId(*spec, text);
  if (!found) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer config: ", key, " '", text, "' is not in the vocabulary"));
  }
  *id = *found;
  return absl::OkStatus();
}

absl::Status ReadConfig(const Json& model, const Json& config, BpeSpec* spec) {
  if (absl::Status s = ReadNamedToken(model, "unk_token", spec, &spec->unk_id); !s.ok()) return s;
  // HF's BPE maps characters missing from the vocab to model.unk_token when it is set.
  spec->unknown_bytes_to_unk = spec->unk_id >= 0;
  if (config.is_null()) return absl::OkStatus();
  for (auto [key, id] :
       {std::pair{"bos_token", &spec->bos_id}, std::pair{"eos_token", &spec->eos_id},
        std::pair{"pad_token", &spec->pad_id}, std::pair{"unk_token", &spec->unk_id}}) {
    if (absl::Status s = ReadNamedToken(config, key, spec, id); !s.ok()) return s;
  }
  spec->add_bos = config.value("add_bos_token", false) && spec->bos_id >= 0;
  spec->add_eos = config.value("add_eos_token", false) && spec->eos_id >= 0;
  return absl::OkStatus();
}

absl::StatusOr<BpeSpec> ParseParsed(const Json& root, const Json& config) {
  BpeSpec spec;
  spec.model = "gpt2";  // byte-level BPE, in GGUF terms
  if (absl::Status s = ReadPipeline(root, &spec); !s.ok()) return s;
  if (absl::Status s = ReadVocab(root, &spec); !s.ok()) return s;
  if (absl::Status s = ReadMerges(root.at("model"), &spec); !s.ok()) return s;
  if (absl::Status s = ReadConfig(root.at("model"), config, &spec); !s.ok()) return s;
  return spec;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// `text` as a JSON object under the client-JSON nesting cap; errors name `document`.
absl::StatusOr<Json> ParseCapped(std::string_view text, std::string_view document) {
  const absl::string_view name = util::ToAbsl(document);
  absl::StatusOr<Json> json = util::ParseClientJson(text, document);
  if (!json.ok()) {
    // The cap's message names a field of the document; say which document.
    const absl::string_view message = json.status().message();
    return absl::InvalidArgumentError(
        absl::StartsWith(message, name) ? std::string(message) : absl::StrCat(name, ": ", message));
  }
  if (!json->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not a JSON object"));
  }
  return json;
}

}  // namespace

absl::StatusOr<BpeSpec> ParseHfTokenizerJson(std::string_view tokenizer_json,
                                             std::string_view tokenizer_config_json) {
  // nlohmann::json reports type errors by throwing; they must not cross this boundary.
  try {
    // Under the nesting cap: AppendStage recurses into Sequence stages and Unsupported dumps a
    // node, both once per level, so a hostile file could otherwise overflow the stack.
    absl::StatusOr<Json> root = ParseCapped(tokenizer_json, "tokenizer.json");
    if (!root.ok()) return root.status();
    Json config;
    if (!tokenizer_config_json.empty()) {
      absl::StatusOr<Json> parsed = ParseCapped(tokenizer_config_json, "tokenizer_config.json");
      if (!parsed.ok()) return parsed.status();
      config = std::move(*parsed);
    }
    return ParseParsed(*root, config);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", e.what()));
  }
}

absl::StatusOr<BpeSpec> ReadBpeSpecFromHfJson(const std::string& path) {
  absl::StatusOr<std::string> json = ReadFile(path);
  if (!json.ok()) return json.status();
  const std::filesystem::path config_path =
      std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::string config;
  std::error_code error;
  if (std::filesystem::exists(config_path, error)) {
    absl::StatusOr<std::string> text = ReadFile(config_path.string());
    if (!text.ok()) return text.status();
    config = *std::move(text);
  }
  absl::StatusOr<BpeSpec> spec = ParseHfTokenizerJson(*json, config);
  if (!spec.ok()) {
    return absl::Status(spec.status().code(), absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfJson(const std::string& path) {
  absl::StatusOr<BpeSpec> spec = ReadBpeSpecFromHfJson(path);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = BpeTokenizer::Create(*std::move(spec));
  if (!tokenizer.ok()) return tokenizer.status();
  return std::unique_ptr<Tokenizer>(std::move(*tokenizer));
}

}  // namespace tessera::tokenizer
