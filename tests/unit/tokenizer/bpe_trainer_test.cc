#include "common/tokenizer/bpe_trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/tokenizer/bpe_tokenizer.h"
#include "common/tokenizer/byte_level.h"

namespace tessera::tokenizer {
namespace {

using ::testing::HasSubstr;

std::string TrainingText() {
  std::string text;
  for (int i = 0; i < 20; ++i) {
    text += "<|im_start|>user\nThe quick brown fox jumps over the lazy dog " + std::to_string(i) +
            " times.<|im_end|>\n<|im_start|>assistant\nThat fox is quick; the dog is lazy. "
            "café 世界 😀<|im_end|>\n";
  }
  return text;
}

const std::vector<std::string> kSpecials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

TEST(BpeTrainerTest, LayoutIsSpecialsThenBytesThenMerges) {
  absl::StatusOr<BpeSpec> spec = TrainByteLevelBpe(TrainingText(), 40, kSpecials);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model, "gpt2");
  EXPECT_EQ(spec->pre_tokenizer, "smollm");
  ASSERT_EQ(spec->tokens.size(), spec->token_types.size());
  for (size_t i = 0; i < kSpecials.size(); ++i) {
    EXPECT_EQ(spec->tokens[i], kSpecials[i]);
    EXPECT_EQ(spec->token_types[i], TokenType::kControl);
  }
  for (int byte = 0; byte < 256; ++byte) {
    EXPECT_EQ(spec->tokens[3 + byte], BytesToByteLevel(std::string(1, static_cast<char>(byte))));
    EXPECT_EQ(spec->token_types[3 + byte], TokenType::kNormal);
  }
  EXPECT_EQ(spec->merges.size(), 40u);
  EXPECT_LE(spec->tokens.size(), 3u + 256u + 40u);
  EXPECT_EQ(spec->bos_id, 0);
  EXPECT_EQ(spec->eos_id, 1);
  EXPECT_EQ(spec->pad_id, 1);
  EXPECT_EQ(spec->unk_id, -1);
}

TEST(BpeTrainerTest, TrainedTokenizerRoundTripsAndCompresses) {
  const std::string text = TrainingText();
  absl::StatusOr<BpeSpec> spec = TrainByteLevelBpe(text, 300, kSpecials);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto tok = BpeTokenizer::Create(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<TokenId> ids = (*tok)->Encode(text, {.add_special = false});
  EXPECT_EQ(*(*tok)->Decode(ids, {}), text);
  EXPECT_LT(ids.size(), text.size() / 3) << "trained merges should compress the training text";
  EXPECT_EQ(ids[0], 1);  // <|im_start|> is one token
}

TEST(BpeTrainerTest, IsDeterministic) {
  absl::StatusOr<BpeSpec> a = TrainByteLevelBpe(TrainingText(), 50, kSpecials);
  absl::StatusOr<BpeSpec> b = TrainByteLevelBpe(TrainingText(), 50, kSpecials);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->merges, b->merges);
  EXPECT_EQ(a->tokens, b->tokens);
}

TEST(BpeTrainerTest, StopsWhenNoPairRepeats) {
  // The training text has few distinct words: once each is one token, nothing repeats.
  absl::StatusOr<BpeSpec> many = TrainByteLevelBpe(TrainingText(), 100000, kSpecials);
  ASSERT_TRUE(many.ok());
  EXPECT_LT(many->merges.size(), 200u);

  absl::StatusOr<BpeSpec> spec = TrainByteLevelBpe("abc", 10, {});
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->merges.empty());
  EXPECT_EQ(spec->tokens.size(), 256u);
  EXPECT_EQ(spec->bos_id, -1);
  EXPECT_TRUE(BpeTokenizer::Create(*spec).ok());
}

TEST(BpeTrainerTest, RejectsBadArguments) {
  EXPECT_EQ(TrainByteLevelBpe("x", -1, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(TrainByteLevelBpe("x", 1, {"<a>", "<a>"}).status().message(), HasSubstr("<a>"));
  EXPECT_FALSE(TrainByteLevelBpe("x", 1, {""}).ok());
}

}  // namespace
}  // namespace tessera::tokenizer
