// Our tokenizer against HF `tokenizers` on 3000 random and mixed texts — code, Unicode from many
// scripts, digit and whitespace runs, special tokens whole and mangled — whose reference ids
// tools/oracle/tokenizer_random_reference.py wrote to tests/data/tokenizer/smollm2_random.jsonl.
// Both of our loaders are checked: the committed HF tokenizer.json (the file the reference came
// from) and the GGUF model (what serving uses; needs models/, a failure without it).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/gguf/gguf_file.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/unit/tokenizer/oracle_data.h"

namespace tessera::tokenizer {
namespace {

constexpr char kRandomReferencePath[] = "tests/data/tokenizer/smollm2_random.jsonl";

struct RandomCase {
  std::string text;
  std::vector<TokenId> ids;        // special tokens parsed
  std::vector<TokenId> ids_plain;  // special tokens as text
};

// The cases of the reference file; fails the calling test on a malformed file.
std::vector<RandomCase> LoadRandomCases() {
  std::ifstream in(kRandomReferencePath, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << kRandomReferencePath;
  std::vector<RandomCase> cases;
  std::string line;
  int64_t declared = -1;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      ADD_FAILURE() << "bad JSON line in " << kRandomReferencePath << ": " << line.substr(0, 80);
      return {};
    }
    if (j.contains("generator")) {
      declared = j.at("count").get<int64_t>();
      continue;
    }
    RandomCase c{j.at("t").get<std::string>(), j.at("i").get<std::vector<TokenId>>(), {}};
    c.ids_plain = j.contains("n") ? j.at("n").get<std::vector<TokenId>>() : c.ids;
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(declared, static_cast<int64_t>(cases.size())) << "header count vs cases";
  return cases;
}

// Escapes control and non-ASCII bytes so a failing text prints on one readable line.
std::string Printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

// Encodes every case both ways; reports the first few mismatches and the count.
void ExpectAllMatch(const Tokenizer& tok, const std::vector<RandomCase>& cases) {
  int mismatches = 0, with_special_difference = 0;
  for (const RandomCase& c : cases) {
    const bool parsed_ok = tok.Encode(c.text, {.add_special = false, .parse_special = true}) ==
                           c.ids;
    const bool plain_ok = tok.Encode(c.text, {.add_special = false, .parse_special = false}) ==
                          c.ids_plain;
    with_special_difference += c.ids != c.ids_plain;
    if (parsed_ok && plain_ok) continue;
    if (++mismatches <= 5) {
      ADD_FAILURE() << (parsed_ok ? "" : "[special parsed] ") << (plain_ok ? "" : "[as text] ")
                    << "ids differ from HF for \"" << Printable(c.text) << "\"";
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " texts";
  // The file must exercise special tokens: hundreds of texts tokenize differently with parsing.
  EXPECT_GE(with_special_difference, 300);
}

TEST(TokenizerRandomOracleTest, HfJsonTokenizerMatchesHfOnThousandsOfRandomTexts) {
  const std::vector<RandomCase> cases = LoadRandomCases();
  ASSERT_GE(cases.size(), 3000u);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::FromHfJson(testing::kHfTokenizerPath);
  ASSERT_TRUE(tok.ok()) << tok.status();
  ExpectAllMatch(**tok, cases);
}

TEST(TokenizerRandomOracleTest, GgufTokenizerMatchesHfOnThousandsOfRandomTexts) {
  ASSERT_TRUE(std::filesystem::exists(testing::kModelPath))
      << testing::kModelPath << " is missing: run scripts/fetch_model.sh";
  const std::vector<RandomCase> cases = LoadRandomCases();
  ASSERT_GE(cases.size(), 3000u);
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(testing::kModelPath);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  ExpectAllMatch(**tok, cases);
}

}  // namespace
}  // namespace tessera::tokenizer
