#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/tokenizer/bpe_tokenizer.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/hf_tokenizer_json_loader.h"
#include "nlohmann/json.hpp"
#include "tests/unit/tokenizer/oracle_data.h"

namespace tessera::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr EncodeOptions kPlain{.add_special = false, .parse_special = true};

// A minimal byte-level tokenizer.json: 2 added tokens, 256 byte symbols, merges for "hello".
Json MinimalTokenizerJson() {
  Json vocab = Json::object();
  vocab["<|endoftext|>"] = 0;
  for (int byte = 0; byte < 256; ++byte) {
    vocab[BytesToByteLevel(std::string(1, static_cast<char>(byte)))] = byte + 1;
  }
  vocab["he"] = 257;
  vocab["ll"] = 258;
  vocab["hell"] = 259;
  vocab["hello"] = 260;
  vocab["Ġhello"] = 261;
  return Json{
      {"version", "1.0"},
      {"added_tokens", Json::array({{{"id", 0}, {"content", "<|endoftext|>"}, {"special", true}},
                                    {{"id", 262}, {"content", "<think>"}, {"special", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", Json::array({"h e", "l l", "he ll", Json::array({"hell", "o"}), "Ġ hello"})}}}};
}

absl::StatusOr<BpeSpec> Parse(const Json& json, const std::string& config = "") {
  return ParseHfTokenizerJson(json.dump(), config);
}

TEST(HfTokenizerJsonTest, ParsesVocabMergesAndAddedTokens) {
  absl::StatusOr<BpeSpec> spec = Parse(MinimalTokenizerJson());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->pre_tokenizer, "gpt2");
  ASSERT_EQ(spec->tokens.size(), 263u);
  EXPECT_EQ(spec->token_types[0], TokenType::kControl);
  EXPECT_EQ(spec->token_types[262], TokenType::kUserDefined);
  EXPECT_EQ(spec->merges[3], "hell o");  // the pair form becomes "a b"
  auto tok = BpeTokenizer::Create(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("hello hello<think><|endoftext|>", kPlain),
              ElementsAre(260, 261, 262, 0));
}

TEST(HfTokenizerJsonTest, ReadsSpecialIdsFromTokenizerConfig) {
  absl::StatusOr<BpeSpec> spec = Parse(
      MinimalTokenizerJson(),
      R"({"bos_token": "<|endoftext|>", "eos_token": {"content": "<think>"}, "add_bos_token": true})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->bos_id, 0);
  EXPECT_EQ(spec->eos_id, 262);
  EXPECT_TRUE(spec->add_bos);
  EXPECT_FALSE(spec->add_eos);
  spec = Parse(MinimalTokenizerJson(), R"({"bos_token": "<nope>"})");
  EXPECT_THAT(spec.status().message(), HasSubstr("bos_token"));
}

TEST(HfTokenizerJsonTest, RecognizesPreTokenizerShapes) {
  Json json = MinimalTokenizerJson();
  json["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", Json::array({{{"type", "Digits"}, {"individual_digits", true}},
                                     {{"type", "ByteLevel"}, {"add_prefix_space", false}}})}};
  absl::StatusOr<BpeSpec> spec = Parse(json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->pre_tokenizer, "smollm");

  json["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       Json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", R"(\p{N}{1,3}|\p{L}+|\s+|.)"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  spec = Parse(json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->pre_tokenizer, "hf-custom");
  EXPECT_THAT(spec->pre_regexes, ElementsAre(R"(\p{N}{1,3}|\p{L}+|\s+|.)"));
  auto tok = BpeTokenizer::Create(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<TokenId> ids = (*tok)->Encode("12345", kPlain);
  EXPECT_EQ(ids.size(), 5u);  // no digit merges: 5 byte tokens, split as "123" "45"

  json["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", "a.b"}};
  spec = Parse(json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->pre_regexes, ElementsAre(R"(a\.b)"));
}

TEST(HfTokenizerJsonTest, UnsupportedComponentsAreUnimplementedAndNamed) {
  struct Case {
    const char* pointer;
    Json value;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"/normalizer", {{"type", "NFC"}}, "normalizer"},
      {"/model/type", "WordPiece", "model type"},
      {"/model/byte_fallback", true, "byte_fallback"},
      {"/decoder", {{"type", "Metaspace"}}, "decoder"},
      {"/pre_tokenizer", {{"type", "Whitespace"}}, "Whitespace"},
      {"/pre_tokenizer/add_prefix_space", true, "add_prefix_space"},
      {"/pre_tokenizer", nullptr, "pre_tokenizer"},
      {"/added_tokens/1/lstrip", true, "<think>"},
  };
  for (const Case& c : cases) {
    Json json = MinimalTokenizerJson();
    json[Json::json_pointer(c.pointer)] = c.value;
    absl::StatusOr<BpeSpec> spec = Parse(json);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kUnimplemented) << c.pointer;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.expected)) << c.pointer;
  }
  Json json = MinimalTokenizerJson();
  json["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Removed"}};
  EXPECT_EQ(Parse(json).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(HfTokenizerJsonTest, MalformedInputIsInvalidArgument) {
  EXPECT_EQ(ParseHfTokenizerJson("{not json", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  Json json = MinimalTokenizerJson();
  json["model"]["vocab"]["he"] = "not an id";  // nlohmann throws; must become a Status
  EXPECT_EQ(Parse(json).status().code(), absl::StatusCode::kInvalidArgument);
  json = MinimalTokenizerJson();
  json["model"]["vocab"]["zzz"] = 500;  // ids 263..499 missing
  EXPECT_THAT(Parse(json).status().message(), HasSubstr("contiguous"));
  json = MinimalTokenizerJson();
  json["model"].erase("merges");
  EXPECT_EQ(Parse(json).status().code(), absl::StatusCode::kInvalidArgument);
  json = MinimalTokenizerJson();
  json["model"]["merges"].push_back(Json::array({"a b", "c"}));
  EXPECT_THAT(Parse(json).status().message(), HasSubstr("space"));
  json = MinimalTokenizerJson();
  json["model"]["merges"].push_back("x yy");
  auto tok = BpeTokenizer::Create(*Parse(json));
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.merges[5]"));
}

// A pre_tokenizer Sequence nested 60,000 deep used to recurse once per level (AppendStage, then
// dump() for the error) and overflow the stack; the file is refused at parse time instead.
TEST(HfTokenizerJsonTest, DeepNestingIsInvalidArgumentNotACrash) {
  std::string deep;
  for (int i = 0; i < 60000; ++i) deep += R"({"type": "Sequence", "pretokenizers": [)";
  deep += R"({"type": "ByteLevel"})";
  for (int i = 0; i < 60000; ++i) deep += "]}";
  Json json = MinimalTokenizerJson();
  json.erase("pre_tokenizer");
  std::string text = json.dump();
  text.insert(1, R"("pre_tokenizer": )" + deep + ", ");
  const absl::Status status = ParseHfTokenizerJson(text, "").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("pre_tokenizer nests deeper than 64 levels"));
}

TEST(HfTokenizerJsonTest, MissingFileIsNotFound) {
  EXPECT_EQ(Tokenizer::FromHfJson("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

// The committed SmolLM2 tokenizer.json (exported by tools/oracle/tokenizer_reference.py)
// reproduces the HF reference ids on the whole corpus; no model file needed.
TEST(HfTokenizerJsonTest, SmolLM2MatchesReferenceIds) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromHfJson(testing::kHfTokenizerPath);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->info().pre_tokenizer, "smollm");
  EXPECT_EQ((*tok)->info().vocab_size, 49152);
  EXPECT_EQ((*tok)->info().bos_id, 1);
  EXPECT_EQ((*tok)->info().eos_id, 2);
  EXPECT_EQ((*tok)->info().unk_id, 0);
  const std::vector<testing::OracleCase> cases = testing::LoadOracleCases();
  ASSERT_GE(cases.size(), 40u);
  for (const testing::OracleCase& c : cases) {
    EXPECT_EQ((*tok)->Encode(c.text, kPlain), c.ids) << c.text;
    EXPECT_EQ((*tok)->Encode(c.text, {.add_special = false, .parse_special = false}),
              c.ids_no_special_parsing)
        << c.text;
  }
}

}  // namespace
}  // namespace tessera::tokenizer
