// A HF directory's tokenizer, read through the GGUF view, encodes like the GGUF twin's: the
// committed SmolLM2 tokenizer.json against the real SmolLM2 GGUF on the tokenizer corpus, and the
// exported tiny vocabulary against the tiny GGUF. Also: padding to vocab_size and what a GGUF
// cannot express.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/chat/chat_template.h"
#include "common/safetensors/hf_gguf_view.h"
#include "common/safetensors/model_file.h"
#include "common/safetensors/safetensors_writer.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/unit/safetensors/safetensors_test_util.h"
#include "tools/convert/hf_export.h"
#include "tools/convert/tiny_model.h"

namespace tessera::safetensors {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kSmolLm2Gguf[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr char kSmolLm2Hf[] = "tests/data/tokenizer/smollm2_hf";
constexpr tokenizer::EncodeOptions kEncode{.add_special = true, .parse_special = true};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A directory with no weights (model.safetensors holds no tensor), `vocab_size` in config.json
// and the given tokenizer files.
std::string TokenizerOnlyDir(const std::string& tag, int vocab_size, const std::string& json,
                             const std::string& config) {
  const std::string dir = testing::FreshDir("hftok_" + tag);
  testing::WriteText(dir + "/config.json",
                     Json{{"architectures", Json::array({"LlamaForCausalLM"})},
                          {"hidden_size", 64},
                          {"intermediate_size", 128},
                          {"num_hidden_layers", 1},
                          {"num_attention_heads", 4},
                          {"max_position_embeddings", 64},
                          {"vocab_size", vocab_size},
                          {"tie_word_embeddings", true}}
                         .dump());
  EXPECT_TRUE(SafetensorsWriter().WriteToFile(dir + "/model.safetensors").ok());
  testing::WriteText(dir + "/tokenizer.json", json);
  if (!config.empty()) testing::WriteText(dir + "/tokenizer_config.json", config);
  return dir;
}

std::unique_ptr<tokenizer::Tokenizer> TokenizerOf(const gguf::GgufFile& file) {
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::Tokenizer::FromGguf(file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

// Llama 3's split regex as its tokenizer.json spells it (Qwen2's has \p{N} for \p{N}{1,3}).
constexpr char kLlama3HfRegex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The SmolLM2 tokenizer.json splitting with `regex` only, as Llama 3's and Qwen2's do.
Json SplitBy(const std::string& regex, bool ignore_merges) {
  Json json = Json::parse(ReadAll(std::string(kSmolLm2Hf) + "/tokenizer.json"));
  json["model"]["ignore_merges"] = ignore_merges;
  const Json split = {{"type", "Split"},
                      {"pattern", {{"Regex", regex}}},
                      {"behavior", "Isolated"},
                      {"invert", false}};
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}};
  json["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers", Json::array({split, byte_level})}};
  return json;
}

TEST(HfTokenizerTest, SmolLm2TokenizerJsonEncodesTheCorpusLikeTheGguf) {
  ASSERT_TRUE(std::filesystem::exists(kSmolLm2Gguf)) << "run scripts/fetch_model.sh";
  auto gguf_file = gguf::GgufFile::Open(kSmolLm2Gguf);
  ASSERT_TRUE(gguf_file.ok()) << gguf_file.status();
  const std::string dir =
      TokenizerOnlyDir("smollm2", 49152, ReadAll(std::string(kSmolLm2Hf) + "/tokenizer.json"),
                       ReadAll(std::string(kSmolLm2Hf) + "/tokenizer_config.json"));
  auto view = OpenHfDirectoryAsGguf(dir);
  ASSERT_TRUE(view.ok()) << view.status();
  auto from_gguf = TokenizerOf(**gguf_file);
  auto from_hf = TokenizerOf(**view);
  ASSERT_TRUE(from_gguf && from_hf);
  EXPECT_EQ(from_hf->info().vocab_size, from_gguf->info().vocab_size);
  EXPECT_EQ(from_hf->info().bos_id, from_gguf->info().bos_id);
  EXPECT_EQ(from_hf->info().eos_id, from_gguf->info().eos_id);
  const Json corpus = Json::parse(ReadAll("tests/data/tokenizer/corpus.json"));
  ASSERT_GT(corpus.size(), 50u);
  for (const Json& text : corpus) {
    EXPECT_EQ(from_hf->Encode(text.get<std::string>(), kEncode),
              from_gguf->Encode(text.get<std::string>(), kEncode))
        << text;
  }
}

TEST(HfTokenizerTest, TheTinyExportEncodesAndTemplatesLikeItsGguf) {
  auto image = convert::BuildTinyLlamaGguf({});
  ASSERT_TRUE(image.ok()) << image.status();
  auto gguf_file = gguf::GgufFile::FromBuffer(*std::move(image));
  ASSERT_TRUE(gguf_file.ok());
  const std::string dir = testing::FreshDir("hftok_tiny");
  ASSERT_TRUE(convert::ExportHfDirectory(**gguf_file, {}, dir).ok());
  auto view = OpenHfDirectoryAsGguf(dir);
  ASSERT_TRUE(view.ok()) << view.status();
  auto from_gguf = TokenizerOf(**gguf_file);
  auto from_hf = TokenizerOf(**view);
  ASSERT_TRUE(from_gguf && from_hf);
  for (const char* text : {"Hello world", "<|im_start|>user\nThe 3 quick foxes!<|im_end|>",
                           "numbers 12345 and    spaces\n\n", "caf\xc3\xa9 \xf0\x9f\x99\x82"}) {
    EXPECT_EQ(from_hf->Encode(text, kEncode), from_gguf->Encode(text, kEncode)) << text;
  }
  const chat::ChatMessage message{.role = "user", .content = "hi"};
  auto hf_chat = chat::ChatTemplate::FromGguf(**view);
  auto gguf_chat = chat::ChatTemplate::FromGguf(**gguf_file);
  ASSERT_TRUE(hf_chat.ok() && gguf_chat.ok()) << hf_chat.status();
  EXPECT_EQ(hf_chat->Apply({&message, 1}, true).value(),
            gguf_chat->Apply({&message, 1}, true).value());
}

// The router's open: tokenizer, template and source facts, but no tensor (nothing copied or
// dequantized, here from an NVFP4 directory).
TEST(HfTokenizerTest, AMetadataOnlyOpenHasTheTokenizerAndNoTensors) {
  auto image = convert::BuildTinyLlamaGguf({});
  ASSERT_TRUE(image.ok()) << image.status();
  auto gguf_file = gguf::GgufFile::FromBuffer(*std::move(image));
  ASSERT_TRUE(gguf_file.ok());
  const std::string dir = testing::FreshDir("hftok_metadata_only");
  ASSERT_TRUE(convert::ExportHfDirectory(**gguf_file, {.nvfp4 = true}, dir).ok());
  auto view = OpenModelFile(dir, util::FileLoad::kMap, ModelContents::kMetadataOnly);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE((*view)->tensors().empty());
  EXPECT_THAT((*view)->GetString(kSourceDtypesKey).value(), HasSubstr("U8 x14"));
  auto tok = TokenizerOf(**view);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("Hello world", kEncode),
            TokenizerOf(**gguf_file)->Encode("Hello world", kEncode));
  EXPECT_TRUE(chat::ChatTemplate::FromGguf(**view).ok());
}

TEST(HfTokenizerTest, TheVocabularyIsPaddedToTheEmbeddingRows) {
  const std::string dir =
      TokenizerOnlyDir("padded", 49160, ReadAll(std::string(kSmolLm2Hf) + "/tokenizer.json"), "");
  auto view = OpenHfDirectoryAsGguf(dir);
  ASSERT_TRUE(view.ok()) << view.status();
  auto tok = TokenizerOf(**view);
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(tok->info().vocab_size, 49160);
  EXPECT_EQ(tok->TokenText(49159), "[PAD49159]");
  EXPECT_EQ(tok->GetTokenType(49159), tokenizer::TokenType::kUnused);
  const std::string small =
      TokenizerOnlyDir("small", 100, ReadAll(std::string(kSmolLm2Hf) + "/tokenizer.json"), "");
  EXPECT_THAT(OpenHfDirectoryAsGguf(small).status().message(),
              HasSubstr("more than config.json's vocab_size 100"));
}

// Llama 3's and Qwen2's tokenizer.json split with "(?i:'s|'t|...)" where llama.cpp's regexes spell
// the cases out: they take the GGUF names (llama3 with ignore_merges, dbrx without, qwen2), and the
// view then encodes the corpus as the HF loader does on the same tokenizer.json.
TEST(HfTokenizerTest, HfSpellingsOfTheLlama3AndQwen2RegexesTakeTheirGgufNames) {
  const std::string llama3 = kLlama3HfRegex;
  std::string qwen2 = llama3;
  const std::string digits = R"(\p{N}{1,3})";
  qwen2.replace(qwen2.find(digits), digits.size(), R"(\p{N})");
  const Json corpus = Json::parse(ReadAll("tests/data/tokenizer/corpus.json"));
  struct Case {
    std::string regex;
    bool ignore_merges;
    const char* name;
  };
  for (const Case& c : {Case{llama3, true, "llama3"}, Case{llama3, false, "dbrx"},
                        Case{qwen2, false, "qwen2"}}) {
    const Json json = SplitBy(c.regex, c.ignore_merges);
    const std::string dir = TokenizerOnlyDir(c.name, 49152, json.dump(), "");
    auto view = OpenHfDirectoryAsGguf(dir);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ((*view)->GetString("tokenizer.ggml.pre").value(), c.name);
    auto from_view = TokenizerOf(**view);
    auto from_hf = tokenizer::Tokenizer::FromHfJson(dir + "/tokenizer.json");
    ASSERT_TRUE(from_view && from_hf.ok()) << from_hf.status();
    for (const Json& text : corpus) {
      EXPECT_EQ(from_view->Encode(text.get<std::string>(), kEncode),
                (*from_hf)->Encode(text.get<std::string>(), kEncode))
          << c.name << ": " << text;
    }
  }
}

// Llama 3's tokenizer_config.json does not say add_bos_token (its post-processor adds the BOS):
// the GGUF default for llama3 (true) applies, as in its conversion; a config that says wins.
TEST(HfTokenizerTest, AddBosFollowsTheConfigElseTheGgufDefault) {
  const Json json = SplitBy(kLlama3HfRegex, /*ignore_merges=*/true);
  const std::pair<const char*, bool> cases[] = {
      {R"({"bos_token": "<|im_start|>"})", true},
      {R"({"bos_token": "<|im_start|>", "add_bos_token": false})", false},
      {"{}", false}};  // no BOS token: nothing to add
  for (const auto& [config, add_bos] : cases) {
    const std::string dir = TokenizerOnlyDir("add_bos", 49152, json.dump(), config);
    auto view = OpenHfDirectoryAsGguf(dir);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ((*view)->GetString("tokenizer.ggml.pre").value(), "llama3");
    auto tok = TokenizerOf(**view);
    ASSERT_NE(tok, nullptr);
    EXPECT_EQ(tok->info().add_bos, add_bos) << config;
  }
}

TEST(HfTokenizerTest, WhatAGgufCannotSayIsUnimplemented) {
  Json json = Json::parse(ReadAll(std::string(kSmolLm2Hf) + "/tokenizer.json"));
  Json unk = json;
  unk["model"]["unk_token"] = "<|endoftext|>";
  Json merges = json;
  merges["model"]["ignore_merges"] = true;
  Json custom = json;
  custom["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Digits"}, {"individual_digits", false}};
  const std::pair<Json, const char*> cases[] = {{unk, "model.unk_token is set"},
                                                {merges, "(with ignore_merges true) is none"},
                                                {custom, "none that GGUF names"}};
  for (const auto& [tokenizer_json, message] : cases) {
    const std::string dir = TokenizerOnlyDir("cannot", 49152, tokenizer_json.dump(), "");
    absl::Status status = OpenHfDirectoryAsGguf(dir).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
    EXPECT_THAT(status.message(), HasSubstr(message));
  }
  const std::string none = TokenizerOnlyDir("none", 49152, "", "");
  std::filesystem::remove(none + "/tokenizer.json");
  EXPECT_EQ(OpenHfDirectoryAsGguf(none).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera::safetensors
