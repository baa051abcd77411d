#include "common/tokenizer/pre_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Split(std::string_view pre_name, std::string_view text) {
  absl::StatusOr<PreTokenizerConfig> config = LookupPreTokenizer(pre_name);
  EXPECT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<PreTokenizer>> pre = PreTokenizer::Create(config->regexes);
  EXPECT_TRUE(pre.ok()) << pre.status();
  std::vector<std::string_view> pieces;
  (*pre)->Split(text, &pieces);
  std::string joined;
  for (std::string_view piece : pieces) {
    EXPECT_FALSE(piece.empty());
    joined += piece;
  }
  EXPECT_EQ(joined, text) << "pieces must cover the text exactly";
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

TEST(PreTokenizerTest, Gpt2SplitsWordsPunctuationAndSpaces) {
  EXPECT_THAT(Split("gpt2", "Hello world! 123"), ElementsAre("Hello", " world", "!", " 123"));
  EXPECT_THAT(Split("gpt2", "don't I'LL"), ElementsAre("don", "'t", " I", "'", "LL"));
  EXPECT_THAT(Split("gpt2", "a  b"), ElementsAre("a", " ", " b"));
  EXPECT_THAT(Split("gpt2", "a \n b"), ElementsAre("a", " \n", " b"));
  EXPECT_THAT(Split("gpt2", "trailing   "), ElementsAre("trailing", "   "));
  EXPECT_THAT(Split("gpt2", "x\ny"), ElementsAre("x", "\n", "y"));
  EXPECT_THAT(Split("gpt2", "f(x) {"), ElementsAre("f", "(", "x", ")", " {"));
  EXPECT_THAT(Split("gpt2", "café 中文"), ElementsAre("café", " 中文"));
}

TEST(PreTokenizerTest, SmollmSplitsDigitsIndividually) {
  EXPECT_THAT(Split("smollm", "Hello world! 123"),
              ElementsAre("Hello", " world", "!", " ", "1", "2", "3"));
  EXPECT_THAT(Split("smollm", "v2.10"), ElementsAre("v", "2", ".", "1", "0"));
  EXPECT_THAT(Split("smollm", "  multiple   spaces"),
              ElementsAre(" ", " multiple", "  ", " spaces"));
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThreeAndNewlines) {
  EXPECT_THAT(Split("llama3", "Hello 1234567"), ElementsAre("Hello", " ", "123", "456", "7"));
  EXPECT_THAT(Split("llama-bpe", "don't"), ElementsAre("don", "'t"));
  EXPECT_THAT(Split("llama3", "I'LL"), ElementsAre("I", "'LL"));  // case-insensitive 'll
  EXPECT_THAT(Split("llama3", "a\n\nb"), ElementsAre("a", "\n\n", "b"));
  EXPECT_THAT(Split("llama3", "x...\n"), ElementsAre("x", "...\n"));
}

TEST(PreTokenizerTest, Qwen2SplitsDigitsIndividually) {
  EXPECT_THAT(Split("qwen2", "abc 123"), ElementsAre("abc", " ", "1", "2", "3"));
}

TEST(PreTokenizerTest, DefaultAppliesFourStages) {
  EXPECT_THAT(Split("default", "a+b 12345"), ElementsAre("a", "+", "b", " ", "123", "45"));
}

TEST(PreTokenizerTest, NextLineIsWhitespaceLikeLlamaCppAndOniguruma) {
  // PCRE2's \s lacks U+0085; without widening, " \u0085" would be one punctuation piece.
  EXPECT_THAT(Split("gpt2", "a \u0085b"), ElementsAre("a", " ", "\u0085", "b"));
}

TEST(PreTokenizerTest, InvalidUtf8BecomesItsOwnPieces) {
  EXPECT_THAT(Split("gpt2",
                    "ab\xFF"
                    "cd"),
              ElementsAre("ab", "\xFF", "cd"));
  EXPECT_THAT(Split("smollm", "\xE4\xB8 x\xC3"), ElementsAre("\xE4\xB8", " x", "\xC3"));
  Split("smollm", std::string("\x80\x80\xFE\xFF\x00 \xF0\x9F", 8));  // covers exactly
}

TEST(PreTokenizerTest, EmptyTextHasNoPieces) { EXPECT_THAT(Split("smollm", ""), ElementsAre()); }

TEST(PreTokenizerTest, UnknownNameIsUnimplementedAndNamed) {
  absl::StatusOr<PreTokenizerConfig> config = LookupPreTokenizer("no-such-pre");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(config.status().message(), HasSubstr("no-such-pre"));
}

TEST(PreTokenizerTest, BadRegexIsInvalidArgument) {
  auto pre = PreTokenizer::Create({"(unclosed"});
  EXPECT_EQ(pre.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pre.status().message(), HasSubstr("(unclosed"));
}

TEST(PreTokenizerTest, EmptyMatchesOnlyMarkBoundaries) {
  auto pre = PreTokenizer::Create({"(?=b)"});
  ASSERT_TRUE(pre.ok());
  std::vector<std::string_view> pieces;
  (*pre)->Split("abab", &pieces);
  EXPECT_THAT(pieces, ElementsAre("a", "ba", "b"));
}

TEST(PreTokenizerTest, WidenWhitespaceClass) {
  EXPECT_EQ(WidenWhitespaceClass(R"(\s+(?!\S))"), R"([\s\x{85}]+(?![^\s\x{85}]))");
  EXPECT_EQ(WidenWhitespaceClass(R"([^\s\p{L}])"), R"([^\s\x{85}\p{L}])");
  EXPECT_EQ(WidenWhitespaceClass(R"([]\s]\\s)"), R"([]\s\x{85}]\\s)");
}

}  // namespace
}  // namespace tessera::tokenizer
