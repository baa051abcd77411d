// StopChecker with the real default model's tokenizer (SmolLM2; needs models/, a missing model is
// a failure) and the tiny generated test model's tokenizer (hermetic; its small vocabulary splits
// most non-ASCII characters into byte tokens).
#include "router/stop_checker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/gguf/gguf_file.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/utf8.h"
#include "tools/convert/tiny_model.h"

namespace tessera::router {
namespace {

using tokenizer::Tokenizer;
using tokenizer::TokenId;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr TokenId kEos = 2;  // <|im_end|> in SmolLM2 and in the tiny model
constexpr TokenId kImStart = 1;
constexpr char kReplacement[] = "\xEF\xBF\xBD";

std::unique_ptr<Tokenizer> LoadTokenizer(absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file) {
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

// What one token at a time gives: the released pieces, and the last output.
struct Fed {
  std::vector<std::string> pieces;
  StopCheckerOutput last;
  std::string text;
  int32_t num_tokens = 0;
};

class StopCheckerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(kModelPath)) {
      tok_ = LoadTokenizer(gguf::GgufFile::Open(kModelPath)).release();
    }
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kModelPath))
        << kModelPath << " is missing: run scripts/fetch_model.sh";
    ASSERT_NE(tok_, nullptr);
  }

  static std::vector<TokenId> Encode(std::string_view text) {
    return tok_->Encode(text, {.add_special = false, .parse_special = true});
  }
  static StopCheckerOptions Options(std::vector<std::string> stops, int32_t max_tokens = 100) {
    StopCheckerOptions options;
    options.stop_strings = std::move(stops);
    options.eos_token_ids = {kEos};
    options.max_tokens = max_tokens;
    return options;
  }
  // Pushes `ids` until the checker finishes (the rest would be a late step: discarded).
  static Fed Feed(const StopCheckerOptions& options, const std::vector<TokenId>& ids) {
    StopChecker checker(*tok_, options);
    Fed run;
    for (TokenId id : ids) {
      absl::StatusOr<StopCheckerOutput> out = checker.Push(id);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) break;
      run.pieces.push_back(out->text);
      run.last = *out;
      if (out->finished()) break;
    }
    run.text = checker.text();
    run.num_tokens = checker.num_tokens();
    return run;
  }

  static Tokenizer* tok_;
};

Tokenizer* StopCheckerTest::tok_ = nullptr;

TEST_F(StopCheckerTest, TokenizationTheTestsRelyOn) {
  EXPECT_THAT(Encode("Hello world. The end"), ElementsAre(19556, 905, 30, 378, 1112));
  EXPECT_THAT(Encode("\xF0\x9F\x98\x80 ok"), ElementsAre(10813, 242, 218, 10907));  // 😀 in 3
  EXPECT_THAT(Encode("abcabd"), ElementsAre(25276, 369, 84));                       // abc ab d
  EXPECT_EQ(tok_->TokenBytes(kEos), "<|im_end|>");
}

TEST_F(StopCheckerTest, StopStringAcrossThreeTokensHoldsBackOnlyTheCandidate) {
  // "Hello" " world" "." " The" " end": the stop "world. The" spans three tokens.
  const Fed run = Feed(Options({"world. The"}), Encode("Hello world. The end"));
  // " world": "world" may start the stop, " " may not, so " " goes out at once.
  EXPECT_THAT(run.pieces, ElementsAre("Hello", " ", "", ""));
  EXPECT_EQ(run.last.reason, StopReason::kStop);
  EXPECT_EQ(run.last.stop_string, "world. The");
  EXPECT_FALSE(run.last.stop_token_id.has_value());
  EXPECT_EQ(run.text, "Hello ");
  EXPECT_EQ(run.num_tokens, 4);  // the token that completed the stop counts
}

TEST_F(StopCheckerTest, StopStringAcrossTwoTokens) {
  const Fed run = Feed(Options({"d. T"}), Encode("Hello world. The end"));
  EXPECT_THAT(run.pieces, ElementsAre("Hello", " worl", "", ""));
  EXPECT_EQ(run.text, "Hello worl");
  EXPECT_EQ(run.last.stop_string, "d. T");
}

TEST_F(StopCheckerTest, StopStringInsideOneTokenDropsTheRestOfThatToken) {
  const Fed run = Feed(Options({"orl"}), Encode("Hello world. The end"));
  EXPECT_THAT(run.pieces, ElementsAre("Hell", "o w"));  // the "o" of "Hello" could start "orl"
  EXPECT_EQ(run.last.reason, StopReason::kStop);
  EXPECT_EQ(run.text, "Hello w");  // "d" after the match is discarded
}

TEST_F(StopCheckerTest, OverlappingStopsTheFirstToCompleteWins) {
  // One token "abc" completes both "ab" and "abc" at offset 0: "ab" completes first.
  Fed run = Feed(Options({"abc", "ab"}), Encode("abcabd"));
  EXPECT_EQ(run.last.stop_string, "ab");
  EXPECT_EQ(run.text, "");
  EXPECT_EQ(run.num_tokens, 1);

  // Byte at a time: "abc" is held as a candidate for "abce", then "bcd" completes first.
  const std::vector<TokenId> letters = {81, 82, 83, 84};  // a b c d
  run = Feed(Options({"abce", "bcd"}), letters);
  EXPECT_THAT(run.pieces, ElementsAre("", "", "", "a"));
  EXPECT_EQ(run.last.stop_string, "bcd");
  EXPECT_EQ(run.text, "a");
}

TEST_F(StopCheckerTest, HeldBackTextIsReleasedAtLength) {
  const Fed run = Feed(Options({"The end"}, /*max_tokens=*/4), Encode("Hello world. The end"));
  EXPECT_THAT(run.pieces, ElementsAre("Hello", " world", ".", " The"));
  EXPECT_EQ(run.last.reason, StopReason::kLength);
  EXPECT_EQ(run.text, "Hello world. The");
  EXPECT_EQ(run.num_tokens, 4);
}

TEST_F(StopCheckerTest, HeldBackCountIsTheLongestCandidateSuffix) {
  StopChecker checker(*tok_, Options({"The end", "xx"}));
  for (TokenId id : Encode("Hello world. The")) ASSERT_TRUE(checker.Push(id).ok());
  EXPECT_EQ(checker.num_held_bytes(), 3u);  // "The"
  EXPECT_EQ(checker.text(), "Hello world. ");
  const StopCheckerOutput out = checker.FinishWithLength();
  EXPECT_EQ(out.text, "The");
  EXPECT_EQ(out.reason, StopReason::kLength);
  EXPECT_TRUE(checker.finished());
}

TEST_F(StopCheckerTest, MultiByteCharacterSplitAcrossTokens) {
  const std::vector<TokenId> ids = Encode("\xF0\x9F\x98\x80 ok");
  Fed run = Feed(Options({}), ids);
  EXPECT_THAT(run.pieces, ElementsAre("", "", "\xF0\x9F\x98\x80", " ok"));

  // A stop string that starts with the split character.
  run = Feed(Options({"\xF0\x9F\x98\x80 o"}), ids);
  EXPECT_EQ(run.last.reason, StopReason::kStop);
  EXPECT_EQ(run.text, "");

  // LENGTH in the middle of the character: the incomplete tail becomes one U+FFFD.
  run = Feed(Options({}, /*max_tokens=*/2), ids);
  EXPECT_EQ(run.last.reason, StopReason::kLength);
  EXPECT_EQ(run.text, kReplacement);
}

TEST_F(StopCheckerTest, EosEndsWithoutItsTextAndReleasesHeldText) {
  std::vector<TokenId> ids = Encode("Hello");
  ids.push_back(kEos);
  const Fed run = Feed(Options({"o w"}), ids);
  EXPECT_THAT(run.pieces, ElementsAre("Hell", "o"));  // "o" was a candidate for "o w"
  EXPECT_EQ(run.last.reason, StopReason::kEos);
  EXPECT_EQ(run.last.stop_token_id, kEos);
  EXPECT_EQ(run.text, "Hello");
  EXPECT_EQ(run.num_tokens, 2);
}

TEST_F(StopCheckerTest, StopTokenIdEndsWithoutItsText) {
  StopCheckerOptions options = Options({});
  options.stop_token_ids = {30};  // "."
  const Fed run = Feed(options, Encode("Hello world. The end"));
  EXPECT_EQ(run.last.reason, StopReason::kStop);
  EXPECT_EQ(run.last.stop_token_id, 30);
  EXPECT_TRUE(run.last.stop_string.empty());
  EXPECT_EQ(run.text, "Hello world");
  EXPECT_EQ(run.num_tokens, 3);
}

TEST_F(StopCheckerTest, EosTakesPrecedenceOverStopIdAndLength) {
  StopCheckerOptions options = Options({}, /*max_tokens=*/1);
  options.stop_token_ids = {kEos};
  const Fed run = Feed(options, {kEos});
  EXPECT_EQ(run.last.reason, StopReason::kEos);
}

TEST_F(StopCheckerTest, StopStringTakesPrecedenceOverLength) {
  const Fed run = Feed(Options({"world"}, /*max_tokens=*/2), Encode("Hello world"));
  EXPECT_EQ(run.last.reason, StopReason::kStop);
  EXPECT_EQ(run.text, "Hello ");
}

TEST_F(StopCheckerTest, IgnoreEosKeepsGoingAndEmitsTheTextUnlessSkipped) {
  StopCheckerOptions options = Options({}, /*max_tokens=*/3);
  options.ignore_eos = true;
  const std::vector<TokenId> ids = {19556, kEos, kImStart};
  Fed run = Feed(options, ids);
  EXPECT_THAT(run.pieces, ElementsAre("Hello", "<|im_end|>", "<|im_start|>"));
  EXPECT_EQ(run.last.reason, StopReason::kLength);

  options.skip_special_tokens = true;
  run = Feed(options, ids);
  EXPECT_THAT(run.pieces, ElementsAre("Hello", "", ""));
  EXPECT_EQ(run.num_tokens, 3);  // the ids still count
}

TEST_F(StopCheckerTest, StopStringCanMatchSpecialTokenTextWhenNotSkipped) {
  StopCheckerOptions options = Options({"<|im_start|>"});
  options.eos_token_ids = {};
  const Fed run = Feed(options, {19556, kImStart, 19556});
  EXPECT_EQ(run.last.reason, StopReason::kStop);
  EXPECT_EQ(run.text, "Hello");
}

TEST_F(StopCheckerTest, InvalidIdIsAnErrorAndLeavesTheStateAlone) {
  StopChecker checker(*tok_, Options({}, /*max_tokens=*/1));
  absl::StatusOr<StopCheckerOutput> bad = checker.Push(1 << 20);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(checker.num_tokens(), 0);
  absl::StatusOr<StopCheckerOutput> good = checker.Push(19556);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->text, "Hello");
  EXPECT_EQ(good->reason, StopReason::kLength);
}

TEST_F(StopCheckerTest, ValidateNamesTheField) {
  const int32_t vocab = tok_->info().vocab_size;
  EXPECT_TRUE(StopChecker::Validate(Options({"a", "b"}), vocab).ok());
  EXPECT_THAT(StopChecker::Validate(Options({"a", ""}), vocab).message(),
              HasSubstr("stop[1] is empty"));
  EXPECT_THAT(StopChecker::Validate(Options({"\xC3"}), vocab).message(),
              HasSubstr("stop[0] is not valid UTF-8"));
  EXPECT_THAT(StopChecker::Validate(Options({}, 0), vocab).message(), HasSubstr("max_tokens"));
  StopCheckerOptions options = Options({});
  options.stop_token_ids = {5, vocab};
  EXPECT_THAT(StopChecker::Validate(options, vocab).message(),
              HasSubstr("stop_token_ids[1] = 49152 is outside the vocabulary"));
}

TEST_F(StopCheckerTest, PushAfterFinishIsABug) {
  StopChecker checker(*tok_, Options({}, /*max_tokens=*/1));
  ASSERT_TRUE(checker.Push(19556).ok());
  EXPECT_DEATH(checker.Push(19556).IgnoreError(), "after the request finished");
}


// ---- Property: released text == Decode(tokens) cut at the first stop to complete ------------

// The first stop string to complete scanning `text` byte by byte (ties: the longest), as
// {begin, index}; {npos, 0} when none does.
std::pair<size_t, size_t> ReferenceMatch(const std::string& text,
                                         const std::vector<std::string>& stops) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t best_begin = std::string::npos, best_index = 0;
    for (size_t i = 0; i < stops.size(); ++i) {
      const size_t len = stops[i].size();
      if (len <= end && text.compare(end - len, len, stops[i]) == 0 && end - len < best_begin) {
        best_begin = end - len;
        best_index = i;
      }
    }
    if (best_begin != std::string::npos) return {best_begin, best_index};
  }
  return {std::string::npos, 0};
}

size_t ReferenceHold(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& stop : stops) {
    for (size_t len = 1; len < stop.size() && len <= text.size(); ++len) {
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) hold = std::max(hold, len);
    }
  }
  return hold;
}

// A random substring of `text` cut at character boundaries (so it is valid UTF-8).
std::string RandomPiece(const std::string& text, std::mt19937& rng) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size(); i += tokenizer::DecodeUtf8At(text, i).length) {
    starts.push_back(i);
  }
  starts.push_back(text.size());
  const size_t a = std::uniform_int_distribution<size_t>(0, starts.size() - 2)(rng);
  const size_t n = std::uniform_int_distribution<size_t>(1, 4)(rng);
  const size_t b = std::min(a + n, starts.size() - 1);
  return text.substr(starts[a], starts[b] - starts[a]);
}

// Feeds Encode(text) with random stop strings and checks, after every token, that exactly the
// longest stop candidate is held back, and at the end that the released text is the reference.
void CheckAgainstDecode(const Tokenizer& tok, const std::string& text, std::mt19937& rng) {
  const std::vector<TokenId> ids = tok.Encode(text, {.add_special = false, .parse_special = false});
  const std::string full = *tok.Decode(ids, {});
  StopCheckerOptions options;
  options.max_tokens = static_cast<int32_t>(ids.size()) + 1;
  const int num_stops = std::uniform_int_distribution<int>(0, 3)(rng);
  for (int i = 0; i < num_stops; ++i) options.stop_strings.push_back(RandomPiece(full, rng));
  options.stop_strings.push_back("\x01never");
  SCOPED_TRACE(::testing::PrintToString(options.stop_strings) + " in " + full);

  StopChecker checker(tok, options);
  for (size_t n = 1; n <= ids.size() && !checker.finished(); ++n) {
    absl::StatusOr<StopCheckerOutput> out = checker.Push(ids[n - 1]);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(tokenizer::IsValidUtf8(out->text));
    if (out->finished()) break;
    std::string so_far = *tok.Decode(std::span<const TokenId>(ids.data(), n), {});
    so_far.resize(tokenizer::CompleteUtf8Prefix(so_far));
    const size_t hold = ReferenceHold(so_far, options.stop_strings);
    ASSERT_EQ(checker.num_held_bytes(), hold);
    ASSERT_EQ(checker.text(), so_far.substr(0, so_far.size() - hold));
  }
  const auto [begin, index] = ReferenceMatch(full, options.stop_strings);
  if (begin == std::string::npos) {
    checker.FinishWithLength();
    EXPECT_EQ(checker.text(), full);
    return;
  }
  ASSERT_EQ(checker.reason(), StopReason::kStop);
  EXPECT_EQ(checker.text(), full.substr(0, begin));
}

const char* const kCorpus[] = {
    "The quick brown fox jumps over the lazy dog. The end.",
    "def f(x):\n    return x * 2  # doubled\n\n",
    "Grüße aus Köln! café naïve résumé",
    "中文测试：你好，世界。日本語もある。",
    "emoji \xF0\x9F\x98\x80\xF0\x9F\x8E\x89 and flags \xF0\x9F\x87\xAF\xF0\x9F\x87\xB5 end",
    "aaaaabaaaabaaab abab ababab",
};

TEST_F(StopCheckerTest, ReleasedTextIsDecodeCutAtTheStopRealTokenizer) {
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    for (const char* text : kCorpus) CheckAgainstDecode(*tok_, text, rng);
  }
}

TEST(StopCheckerTinyModelTest, ReleasedTextIsDecodeCutAtTheStop) {
  absl::StatusOr<std::vector<uint8_t>> image = convert::BuildTinyLlamaGguf({});
  ASSERT_TRUE(image.ok()) << image.status();
  std::unique_ptr<Tokenizer> tok = LoadTokenizer(gguf::GgufFile::FromBuffer(*std::move(image)));
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(11);
  for (int round = 0; round < 40; ++round) {
    for (const char* text : kCorpus) CheckAgainstDecode(*tok, text, rng);
  }
}

TEST(StopCheckerTinyModelTest, EosAndCharacterSplitIntoByteTokens) {
  absl::StatusOr<std::vector<uint8_t>> image = convert::BuildTinyLlamaGguf({});
  ASSERT_TRUE(image.ok()) << image.status();
  std::unique_ptr<Tokenizer> tok = LoadTokenizer(gguf::GgufFile::FromBuffer(*std::move(image)));
  ASSERT_NE(tok, nullptr);
  std::vector<TokenId> ids = tok->Encode("中", {.add_special = false});
  ASSERT_EQ(ids.size(), 3u);  // one byte token per UTF-8 byte in the tiny vocabulary
  ids.push_back(tok->info().eos_id);
  StopCheckerOptions options;
  options.eos_token_ids = {tok->info().eos_id};
  StopChecker checker(*tok, options);
  std::vector<std::string> pieces;
  for (TokenId id : ids) pieces.push_back(checker.Push(id)->text);
  EXPECT_THAT(pieces, ElementsAre("", "", "中", ""));
  EXPECT_EQ(checker.reason(), StopReason::kEos);
  EXPECT_EQ(checker.num_tokens(), 4);
}

}  // namespace
}  // namespace tessera::router
