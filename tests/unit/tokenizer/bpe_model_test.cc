#include "common/tokenizer/bpe_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "common/tokenizer/byte_level.h"
#include "tests/unit/tokenizer/test_specs.h"

namespace tessera::tokenizer {
namespace {

using testing::BuildSpec;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BpeModelTest : public ::testing::Test {
 protected:
  void Build(const std::vector<std::string>& merges, BpeModel::Options options = {}) {
    spec_ = BuildSpec({}, merges);
    auto model = BpeModel::Create(spec_.tokens, spec_.merges, options);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }
  // Id of a token given as raw text (converted to byte-level symbols).
  TokenId Id(std::string_view raw) const { return *model_->FindToken(BytesToByteLevel(raw)); }
  std::vector<TokenId> Encode(std::string_view word) const {
    std::vector<TokenId> ids;
    model_->EncodeWord(word, &ids);
    return ids;
  }

  BpeSpec spec_;
  std::unique_ptr<BpeModel> model_;
};

TEST_F(BpeModelTest, MergesByRankNotLeftToRight) {
  Build({"b c", "a b"});  // "bc" outranks "ab"
  EXPECT_THAT(Encode("abc"), ElementsAre(Id("a"), Id("bc")));
  EXPECT_THAT(Encode("ab"), ElementsAre(Id("ab")));
}

TEST_F(BpeModelTest, EqualRanksMergeLeftmostFirst) {
  Build({"a a"});
  EXPECT_THAT(Encode("aaa"), ElementsAre(Id("aa"), Id("a")));
  EXPECT_THAT(Encode("aaaa"), ElementsAre(Id("aa"), Id("aa")));
}

TEST_F(BpeModelTest, MergesChainIntoWholeWords) {
  Build({"h e", "l l", "he ll", "hell o", "Ġ w"});
  EXPECT_THAT(Encode("hello"), ElementsAre(Id("hello")));
  EXPECT_THAT(Encode("hellohe"), ElementsAre(Id("hello"), Id("he")));
  EXPECT_THAT(Encode(" w"), ElementsAre(Id(" w")));
}

TEST_F(BpeModelTest, UnmergeableBytesFallBackToByteTokens) {
  Build({"h e"});
  EXPECT_THAT(Encode("\xE4\xB8\xAD"), ElementsAre(Id("\xE4"), Id("\xB8"), Id("\xAD")));
  EXPECT_THAT(Encode("\xFF"), ElementsAre(Id("\xFF")));
  EXPECT_THAT(Encode(std::string("\0h", 2)), ElementsAre(Id(std::string(1, '\0')), Id("h")));
}

TEST_F(BpeModelTest, CacheDoesNotChangeResults) {
  Build({"h e", "l l", "he ll", "hell o"}, {.cache_capacity = 2});
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(Encode("hello"), ElementsAre(Id("hello")));
    EXPECT_THAT(Encode("hell"), ElementsAre(Id("hell")));
    EXPECT_THAT(Encode("oh"), ElementsAre(Id("o"), Id("h")));
  }
}

TEST_F(BpeModelTest, IgnoreMergesEmitsWholeVocabWords) {
  BpeSpec spec = BuildSpec({}, {"a b"});
  spec.tokens.push_back("abc");  // reachable only as a whole word: no merge builds it
  auto model = BpeModel::Create(spec.tokens, spec.merges, {.ignore_merges = true});
  ASSERT_TRUE(model.ok());
  std::vector<TokenId> ids;
  (*model)->EncodeWord("abc", &ids);
  EXPECT_THAT(ids, ElementsAre(static_cast<TokenId>(spec.tokens.size() - 1)));
}

TEST_F(BpeModelTest, ShortWordLoopAgreesWithPriorityQueue) {
  Build({"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "a a", "aa aa", "a b",
         "b a", "ab a", "l o", "lo w"});
  auto queue_only =
      BpeModel::Create(spec_.tokens, spec_.merges, {.cache_capacity = 0, .max_small_word = 0});
  ASSERT_TRUE(queue_only.ok());
  std::mt19937 rng(7);
  const std::string alphabet = "helowrdab ";
  for (int i = 0; i < 3000; ++i) {
    std::string word;
    for (size_t j = 0, n = 2 + rng() % 31; j < n; ++j) word += alphabet[rng() % alphabet.size()];
    std::vector<TokenId> expected;
    (*queue_only)->EncodeWord(word, &expected);
    ASSERT_EQ(Encode(word), expected) << word;
  }
}

TEST_F(BpeModelTest, LongWordsStayCorrect) {
  Build({"a a", "aa aa"});
  std::string word(10001, 'a');
  std::vector<TokenId> ids = Encode(word);
  ASSERT_EQ(ids.size(), 2501u);
  for (size_t i = 0; i < 2500; ++i) ASSERT_EQ(ids[i], Id("aaaa"));
  EXPECT_EQ(ids.back(), Id("a"));
}

TEST(BpeModelErrorsTest, MergeWithUnknownHalfNamesTheMerge) {
  BpeSpec spec = BuildSpec({}, {});
  auto model = BpeModel::Create(spec.tokens, {"a zz"}, {});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("tokenizer.ggml.merges[0]"));
  EXPECT_THAT(model.status().message(), HasSubstr("'zz'"));
}

TEST(BpeModelErrorsTest, MergeWhoseResultIsMissing) {
  BpeSpec spec = BuildSpec({}, {});
  auto model = BpeModel::Create(spec.tokens, {"a b"}, {});  // "ab" not in vocab
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("'ab' is not in the vocabulary"));
}

TEST(BpeModelErrorsTest, MalformedMerge) {
  BpeSpec spec = BuildSpec({}, {});
  for (const char* bad : {"ab", " a", "a ", "a b c"}) {
    auto model = BpeModel::Create(spec.tokens, {bad}, {});
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(model.status().message(), HasSubstr("tokenizer.ggml.merges[0]"));
  }
}

TEST(BpeModelErrorsTest, MissingByteSymbolIsDroppedWithoutUnk) {
  BpeSpec spec = BuildSpec({}, {"a b"});
  spec.tokens[0xFF] = "<not-a-byte>";  // byte 0xFF ('ÿ') is gone, as in SmolLM2's vocab
  auto model = BpeModel::Create(spec.tokens, spec.merges, {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_missing_bytes(), 1);
  std::vector<TokenId> ids;
  (*model)->EncodeWord(
      "a\xFF"
      "b",
      &ids);  // the missing byte does not block merging around it
  (*model)->EncodeWord("\xFF", &ids);
  EXPECT_THAT(ids, ElementsAre(*(*model)->FindToken("a"), *(*model)->FindToken("b")));
}

TEST(BpeModelErrorsTest, VocabWithoutByteSymbolsIsRejected) {
  auto model = BpeModel::Create({"<s>", "hello world"}, {}, {});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("tokenizer.ggml.tokens"));
}

TEST(BpeModelErrorsTest, MissingByteSymbolUsesUnkWhenPresent) {
  BpeSpec spec = BuildSpec({}, {});
  spec.tokens[0xFF] = "<unk>";
  auto model = BpeModel::Create(spec.tokens, {}, {.unk_id = 0xFF});
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<TokenId> ids;
  (*model)->EncodeWord("a\xFF", &ids);
  EXPECT_THAT(ids, ElementsAre(*(*model)->FindToken("a"), 0xFF));
}

}  // namespace
}  // namespace tessera::tokenizer
