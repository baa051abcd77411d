#include "tools/convert/hf_export_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/tokenizer/bpe_spec.h"
#include "common/tokenizer/gguf_tokenizer_loader.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace tessera::convert {
namespace {

using Json = nlohmann::ordered_json;
using tokenizer::TokenType;

absl::StatusOr<Json> Model(const tokenizer::BpeSpec& spec, bool ignore_merges, Json* added) {
  Json vocab = Json::object();
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const TokenType type = spec.token_types[id];
    if (type == TokenType::kNormal) {
      vocab[spec.tokens[id]] = id;
    } else if (type == TokenType::kControl || type == TokenType::kUserDefined) {
      added->push_back({{"id", id},
                        {"content", spec.tokens[id]},
                        {"single_word", false},
                        {"lstrip", false},
                        {"rstrip", false},
                        {"normalized", false},
                        {"special", type == TokenType::kControl}});
    } else {
      return absl::UnimplementedError(absl::StrCat("token ", id, " '", spec.tokens[id],
                                                   "' has type ", static_cast<int>(type),
                                                   ", which tokenizer.json cannot carry"));
    }
  }
  return Json{{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", nullptr},
              {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr},
              {"fuse_unk", false},
              {"byte_fallback", false},
              {"ignore_merges", ignore_merges},
              {"vocab", std::move(vocab)},
              {"merges", spec.merges}};
}

Json PreTokenizer(const std::vector<std::string>& regexes) {
  Json stages = Json::array();
  for (const std::string& regex : regexes) {
    stages.push_back({{"type", "Split"},
                      {"pattern", {{"Regex", regex}}},
                      {"behavior", "Isolated"},
                      {"invert", false}});
  }
  stages.push_back({{"type", "ByteLevel"},
                    {"add_prefix_space", false},
                    {"trim_offsets", false},
                    {"use_regex", false}});
  return {{"type", "Sequence"}, {"pretokenizers", std::move(stages)}};
}

Json TokenizerConfig(const gguf::GgufFile& file, const tokenizer::BpeSpec& spec) {
  Json config = Json::object();
  for (auto [key, id] :
       {std::pair{"bos_token", spec.bos_id}, std::pair{"eos_token", spec.eos_id},
        std::pair{"pad_token", spec.pad_id}, std::pair{"unk_token", spec.unk_id}}) {
    if (id >= 0) config[key] = spec.tokens[id];
  }
  config["add_bos_token"] = spec.add_bos;
  config["add_eos_token"] = spec.add_eos;
  if (absl::StatusOr<std::string> chat = file.GetString("tokenizer.chat_template"); chat.ok()) {
    config["chat_template"] = *chat;
  }
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  return config;
}

absl::Status WriteJson(const std::string& path, const Json& json) {
  std::ofstream out(path, std::ios::trunc);
  out << json.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteHfTokenizerFiles(const gguf::GgufFile& file, const std::string& dir) {
  TESSERA_ASSIGN_OR_RETURN(const tokenizer::BpeSpec spec, tokenizer::ReadBpeSpecFromGguf(file));
  TESSERA_ASSIGN_OR_RETURN(const tokenizer::PreTokenizerConfig pre,
                           tokenizer::LookupPreTokenizer(spec.pre_tokenizer));
  Json added = Json::array();
  TESSERA_ASSIGN_OR_RETURN(Json model, Model(spec, pre.ignore_merges, &added));
  const Json tokenizer_json = {{"version", "1.0"},
                               {"truncation", nullptr},
                               {"padding", nullptr},
                               {"added_tokens", std::move(added)},
                               {"normalizer", nullptr},
                               {"pre_tokenizer", PreTokenizer(pre.regexes)},
                               {"post_processor", nullptr},
                               {"decoder",
                                {{"type", "ByteLevel"},
                                 {"add_prefix_space", false},
                                 {"trim_offsets", false},
                                 {"use_regex", false}}},
                               {"model", std::move(model)}};
  const std::filesystem::path root(dir);
  TESSERA_RETURN_IF_ERROR(WriteJson((root / "tokenizer.json").string(), tokenizer_json));
  return WriteJson((root / "tokenizer_config.json").string(), TokenizerConfig(file, spec));
}

}  // namespace tessera::convert
