#include "common/tokenizer/streaming_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/tokenizer/bpe_tokenizer.h"
#include "common/tokenizer/byte_level.h"
#include "tests/unit/tokenizer/test_specs.h"

namespace tessera::tokenizer {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

class StreamingDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = BpeTokenizer::Create(testing::TinySpec());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tok_ = std::move(*tokenizer);
  }
  TokenId Byte(uint8_t byte) const {
    return *tok_->FindToken(BytesToByteLevel(std::string(1, static_cast<char>(byte))));
  }
  std::vector<std::string> PushAll(StreamingDecoder& decoder, const std::vector<TokenId>& ids) {
    std::vector<std::string> outputs;
    for (TokenId id : ids) {
      absl::StatusOr<std::string> out = decoder.Push(id);
      EXPECT_TRUE(out.ok()) << out.status();
      outputs.push_back(out.value_or("?"));
    }
    return outputs;
  }

  std::unique_ptr<BpeTokenizer> tok_;
};

TEST_F(StreamingDecoderTest, HoldsBackEmojiSplitOverByteTokens) {
  StreamingDecoder decoder(*tok_);
  EXPECT_THAT(PushAll(decoder, {Byte(0xF0), Byte(0x9F), Byte(0x98), Byte(0x80)}),
              ::testing::ElementsAre("", "", "", "\xF0\x9F\x98\x80"));
  EXPECT_EQ(decoder.Flush(), "");
}

TEST_F(StreamingDecoderTest, EmitsCompletePrefixAndKeepsTheRest) {
  StreamingDecoder decoder(*tok_);
  const TokenId hello = *tok_->FindToken("hello");
  // "hello" + first byte of 中, then the remaining two bytes.
  EXPECT_THAT(PushAll(decoder, {hello, Byte(0xE4), Byte(0xB8), Byte(0xAD), hello}),
              ::testing::ElementsAre("hello", "", "", "\xE4\xB8\xAD", "hello"));
}

TEST_F(StreamingDecoderTest, InvalidBytesBecomeReplacementCharactersRightAway) {
  StreamingDecoder decoder(*tok_);
  EXPECT_THAT(PushAll(decoder, {Byte(0xFF), Byte(0xF0), Byte(0x9F), Byte('a')}),
              ::testing::ElementsAre(kReplacement, "", "", std::string(kReplacement) + "a"));
}

TEST_F(StreamingDecoderTest, FlushReplacesATruncatedTailAndResets) {
  StreamingDecoder decoder(*tok_);
  PushAll(decoder, {Byte(0xE4), Byte(0xB8)});
  EXPECT_EQ(decoder.num_pending_bytes(), 2u);
  EXPECT_EQ(decoder.Flush(), kReplacement);
  EXPECT_EQ(decoder.num_pending_bytes(), 0u);
  EXPECT_EQ(decoder.Flush(), "");
}

TEST_F(StreamingDecoderTest, ConcatenationEqualsDecodeForValidText) {
  const std::string text =
      "<|im_start|>hello 世界 👨‍👩‍👧 🇯🇵 café\n<tool> ab<|im_end|>";
  const std::vector<TokenId> ids =
      tok_->Encode(text, {.add_special = false, .parse_special = true});
  StreamingDecoder decoder(*tok_);
  std::string streamed;
  for (const std::string& piece : PushAll(decoder, ids)) streamed += piece;
  streamed += decoder.Flush();
  EXPECT_EQ(streamed, *tok_->Decode(ids, {}));
  EXPECT_EQ(streamed, text);
}

TEST_F(StreamingDecoderTest, SkipSpecialAndBadIds) {
  StreamingDecoder decoder(*tok_, {.skip_special = true});
  EXPECT_EQ(*decoder.Push(*tok_->FindToken("<|im_start|>")), "");
  PushAll(decoder, {Byte(0xE4)});
  absl::StatusOr<std::string> bad = decoder.Push(1 << 20);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(decoder.num_pending_bytes(), 1u);  // unchanged by the failed push
}

}  // namespace
}  // namespace tessera::tokenizer
