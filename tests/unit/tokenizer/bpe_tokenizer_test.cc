#include "common/tokenizer/bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "common/tokenizer/byte_level.h"
#include "tests/unit/tokenizer/test_specs.h"

namespace tessera::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TinySpec;

constexpr EncodeOptions kPlain{.add_special = false, .parse_special = true};

class BpeTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = BpeTokenizer::Create(TinySpec());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tok_ = std::move(*tokenizer);
  }
  TokenId Id(std::string_view raw) const { return *tok_->FindToken(BytesToByteLevel(raw)); }
  std::string Decode(const std::vector<TokenId>& ids, DecodeOptions options = {}) const {
    absl::StatusOr<std::string> text = tok_->Decode(ids, options);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.value_or("");
  }

  std::unique_ptr<BpeTokenizer> tok_;
};

TEST_F(BpeTokenizerTest, InfoDescribesTheSpec) {
  const TokenizerInfo& info = tok_->info();
  EXPECT_EQ(info.model, "gpt2");
  EXPECT_EQ(info.pre_tokenizer, "gpt2");
  EXPECT_EQ(info.vocab_size, 5 + 256 + 10);
  EXPECT_EQ(info.num_merges, 10);
  EXPECT_EQ(info.num_special, 5);
  EXPECT_EQ(info.bos_id, 0);
  EXPECT_EQ(info.eos_id, 1);
}

TEST_F(BpeTokenizerTest, EncodesWordsWithMerges) {
  EXPECT_THAT(tok_->Encode("hello world", kPlain), ElementsAre(Id("hello"), Id(" world")));
  EXPECT_THAT(tok_->Encode("", kPlain), ElementsAre());
}

TEST_F(BpeTokenizerTest, MatchesSpecialTokensBeforePreTokenizing) {
  const TokenId im_start = *tok_->FindToken("<|im_start|>");
  const TokenId im_end = *tok_->FindToken("<|im_end|>");
  EXPECT_THAT(tok_->Encode("<|im_start|>hello<|im_end|>", kPlain),
              ElementsAre(im_start, Id("hello"), im_end));
  // Not parsed: the text is tokenized like any other.
  std::vector<TokenId> plain =
      tok_->Encode("<|im_start|>", {.add_special = false, .parse_special = false});
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(Decode(plain), "<|im_start|>");
  // User-defined tokens are matched either way.
  const TokenId tool = *tok_->FindToken("<tool>");
  EXPECT_THAT(tok_->Encode("<tool>", {.add_special = false, .parse_special = false}),
              ElementsAre(tool));
}

TEST_F(BpeTokenizerTest, AddsBosAndEosOnlyWhenConfiguredAndAsked) {
  EXPECT_THAT(tok_->Encode("ab", {.add_special = true}), ElementsAre(Id("ab")));
  BpeSpec spec = TinySpec();
  spec.add_bos = spec.add_eos = true;
  auto tok = BpeTokenizer::Create(spec);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT((*tok)->Encode("ab", {.add_special = true}), ElementsAre(0, Id("ab"), 1));
  EXPECT_THAT((*tok)->Encode("ab", {.add_special = false}), ElementsAre(Id("ab")));
  EXPECT_THAT((*tok)->Encode("", {.add_special = true}), ElementsAre(0, 1));
}

TEST_F(BpeTokenizerTest, DecodeRoundTripsAndSkipsControlTokensOnRequest) {
  const std::string text = "<s>hello <tool> world\n\xE4\xB8\xAD!<|im_end|>";
  const std::vector<TokenId> ids = tok_->Encode(text, kPlain);
  EXPECT_EQ(Decode(ids), text);
  EXPECT_EQ(Decode(ids, {.skip_special = true}), "hello <tool> world\n\xE4\xB8\xAD!");
}

TEST_F(BpeTokenizerTest, InvalidUtf8RoundTripsThroughByteTokens) {
  constexpr char kText[] = "ab\xFF\xFE hello \xC3\x28 \xF0\x9F\x98 \x80\0z";
  const std::string text(kText, sizeof(kText) - 1);  // keeps the embedded NUL
  EXPECT_EQ(Decode(tok_->Encode(text, kPlain)), text);
}

TEST_F(BpeTokenizerTest, DecodeRejectsOutOfRangeIdsNamingThem) {
  absl::StatusOr<std::string> text = tok_->Decode(std::vector<TokenId>{Id("a"), 99999}, {});
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("index 1"));
  EXPECT_THAT(text.status().message(), HasSubstr("99999"));
  EXPECT_FALSE(tok_->Decode(std::vector<TokenId>{-1}, {}).ok());
}

TEST_F(BpeTokenizerTest, TokenAccessors) {
  EXPECT_EQ(tok_->TokenText(Id(" world")), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(tok_->TokenBytes(Id(" world")), " world");
  EXPECT_EQ(tok_->TokenBytes(2), "<|im_start|>");
  EXPECT_EQ(tok_->GetTokenType(2), TokenType::kControl);
  EXPECT_EQ(tok_->GetTokenType(4), TokenType::kUserDefined);
  EXPECT_FALSE(tok_->FindToken("nope").has_value());
}

TEST_F(BpeTokenizerTest, ConcurrentEncodesAgree) {
  const std::string text = "hello world <|im_start|> ab \xF0\x9F\x98\x80 hello";
  const std::vector<TokenId> expected = tok_->Encode(text, kPlain);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        if (tok_->Encode(text, kPlain) != expected) ++mismatches;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// A small fuzz: random bytes (biased towards UTF-8 lead/continuation bytes, whitespace, digits
// and special-token fragments) never crash any pre-tokenizer and always round-trip.
TEST(BpeTokenizerFuzzTest, RandomBytesRoundTripWithEveryPreTokenizer) {
  const std::vector<std::string> alphabet = {"a",        "Z",     "7",      " ",
                                             "\n",       "\r",    "\t",     "'s",
                                             "<|im_",    "end|>", "<tool>", "\xC3",
                                             "\xA9",     "\xE4",  "\xB8",   "\xF0",
                                             "\x9F",     "\x80",  "\xFF",   std::string(1, '\0'),
                                             "\xC2\x85", "!"};
  std::mt19937 rng(42);
  for (const char* pre : {"gpt2", "smollm", "llama3", "qwen2", "default"}) {
    BpeSpec spec = TinySpec();
    spec.pre_tokenizer = pre;
    auto tok = BpeTokenizer::Create(spec);
    ASSERT_TRUE(tok.ok()) << tok.status();
    for (int i = 0; i < 500; ++i) {
      std::string text;
      const int length = static_cast<int>(rng() % 24);
      for (int j = 0; j < length; ++j) text += alphabet[rng() % alphabet.size()];
      for (bool parse : {true, false}) {
        const std::vector<TokenId> ids = (*tok)->Encode(text, {.parse_special = parse});
        ASSERT_EQ(*(*tok)->Decode(ids, {}), text) << pre;
      }
    }
  }
}

// The test's own BPE, independent of BpeTokenizer: byte-level symbols of `word`, then the
// lowest-ranked adjacent pair merged (leftmost first) until no merge applies.
std::vector<std::string> NaiveBpe(const std::string& word, const std::vector<std::string>& merges) {
  std::vector<std::string> symbols;
  for (char c : word) symbols.push_back(BytesToByteLevel(std::string(1, c)));
  while (symbols.size() > 1) {
    size_t best_rank = merges.size(), best_at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const std::string pair = symbols[i] + " " + symbols[i + 1];
      for (size_t rank = 0; rank < best_rank; ++rank) {
        if (merges[rank] == pair) {
          best_rank = rank;
          best_at = i;
          break;
        }
      }
    }
    if (best_rank == merges.size()) break;
    symbols[best_at] += symbols[best_at + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  return symbols;
}

// Random words over the merges' letters, joined by single spaces (so each " word" is exactly one
// gpt2 pre-token): the ids must be the naive BPE's, so merges are really applied — a tokenizer
// that only round-trips bytes fails — and the texts must use merges at all.
TEST(BpeTokenizerFuzzTest, RandomWordsGetExactlyTheMergesAReferenceBpeApplies) {
  const BpeSpec spec = TinySpec();
  auto tok = BpeTokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string letters = "helowrdab";
  std::mt19937 rng(7);
  size_t bytes = 0, tokens = 0;
  int mismatches = 0;
  for (int i = 0; i < 500; ++i) {
    std::string text;
    std::vector<TokenId> expected;
    const int num_words = 1 + static_cast<int>(rng() % 6);
    for (int w = 0; w < num_words; ++w) {
      std::string word = w == 0 ? "" : " ";
      const int length = 1 + static_cast<int>(rng() % 7);
      for (int j = 0; j < length; ++j) word += letters[rng() % letters.size()];
      if (rng() % 4 == 0) word += rng() % 2 ? "hello" : "world";
      text += word;
      for (const std::string& symbol : NaiveBpe(word, spec.merges)) {
        const std::optional<TokenId> id = (*tok)->FindToken(symbol);
        ASSERT_TRUE(id.has_value()) << symbol;
        expected.push_back(*id);
      }
    }
    if ((*tok)->Encode(text, kPlain) != expected && ++mismatches <= 3) {
      EXPECT_EQ((*tok)->Encode(text, kPlain), expected) << "\"" << text << "\"";
    }
    bytes += text.size();
    tokens += expected.size();
  }
  EXPECT_EQ(mismatches, 0) << "of 500 texts differ from the reference BPE";
  EXPECT_LT(tokens * 10, bytes * 9) << "the random texts hardly use any merge";
}

TEST(BpeTokenizerErrorsTest, UnsupportedModelIsUnimplementedAndNamed) {
  BpeSpec spec = TinySpec();
  spec.model = "llama";
  auto tok = BpeTokenizer::Create(spec);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(tok.status().message(), HasSubstr("'llama'"));
}

TEST(BpeTokenizerErrorsTest, UnknownPreTokenizerIsUnimplementedAndNamed) {
  BpeSpec spec = TinySpec();
  spec.pre_tokenizer = "mystery-pre";
  auto tok = BpeTokenizer::Create(spec);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(tok.status().message(), HasSubstr("mystery-pre"));
}

TEST(BpeTokenizerErrorsTest, TokenTypeLengthMismatchNamesTheKey) {
  BpeSpec spec = TinySpec();
  spec.token_types.pop_back();
  auto tok = BpeTokenizer::Create(spec);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.token_type"));
}

TEST(BpeTokenizerErrorsTest, SpecialIdsOutOfRangeNameTheKey) {
  BpeSpec spec = TinySpec();
  spec.bos_id = 100000;
  auto tok = BpeTokenizer::Create(spec);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.bos_token_id"));
  spec = TinySpec();
  spec.eos_id = -5;
  EXPECT_THAT(BpeTokenizer::Create(spec).status().message(),
              HasSubstr("tokenizer.ggml.eos_token_id"));
  spec = TinySpec();
  spec.bos_id = -1;
  spec.add_bos = true;
  EXPECT_THAT(BpeTokenizer::Create(spec).status().message(),
              HasSubstr("tokenizer.ggml.add_bos_token"));
}

TEST(BpeTokenizerErrorsTest, BadMergeNamesTheKey) {
  BpeSpec spec = TinySpec();
  spec.merges.push_back("q zz");
  auto tok = BpeTokenizer::Create(spec);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.merges[10]"));
}

TEST(BpeTokenizerErrorsTest, EmptyVocabAndBadTokenType) {
  BpeSpec spec;
  spec.pre_tokenizer = "gpt2";
  EXPECT_THAT(BpeTokenizer::Create(spec).status().message(), HasSubstr("tokenizer.ggml.tokens"));
  spec = TinySpec();
  spec.token_types[3] = static_cast<TokenType>(42);
  EXPECT_THAT(BpeTokenizer::Create(spec).status().message(),
              HasSubstr("tokenizer.ggml.token_type[3]"));
}

TEST(BpeTokenizerErrorsTest, CustomRegexesReplaceTheNamedPreTokenizer) {
  BpeSpec spec = TinySpec();
  spec.pre_tokenizer = "not-a-gguf-name";
  spec.pre_regexes = {R"(\p{L}+|\s+|.)"};
  auto tok = BpeTokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // " world" is now two pieces (" " and "world"), so the "Ġw" merges cannot apply.
  auto id = [&](std::string_view raw) { return *(*tok)->FindToken(BytesToByteLevel(raw)); };
  EXPECT_THAT((*tok)->Encode("hello world", kPlain),
              ElementsAre(id("hello"), id(" "), id("w"), id("or"), id("ld")));
}

}  // namespace
}  // namespace tessera::tokenizer
