#include "common/tokenizer/gguf_tokenizer_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "common/tokenizer/bpe_tokenizer.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer/test_specs.h"

namespace tessera::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Which keys to write and how; tests tweak one thing at a time.
struct GgufTokenizerKeys {
  BpeSpec spec = testing::TinySpec();
  bool write_pre = true;
  bool write_types = true;
  bool write_merges = true;
  std::function<void(gguf::GgufWriter&)> extra;
};

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> WriteGguf(const GgufTokenizerKeys& keys) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  writer.AddString("tokenizer.ggml.model", keys.spec.model);
  if (keys.write_pre) writer.AddString("tokenizer.ggml.pre", keys.spec.pre_tokenizer);
  writer.AddStringArray("tokenizer.ggml.tokens", keys.spec.tokens);
  if (keys.write_types) {
    std::vector<int32_t> types;
    for (TokenType type : keys.spec.token_types) types.push_back(static_cast<int32_t>(type));
    writer.AddInt32Array("tokenizer.ggml.token_type", types);
  }
  if (keys.write_merges) writer.AddStringArray("tokenizer.ggml.merges", keys.spec.merges);
  if (keys.spec.bos_id >= 0) writer.AddUint32("tokenizer.ggml.bos_token_id", keys.spec.bos_id);
  if (keys.spec.eos_id >= 0) writer.AddUint32("tokenizer.ggml.eos_token_id", keys.spec.eos_id);
  if (keys.spec.unk_id >= 0) writer.AddUint32("tokenizer.ggml.unknown_token_id", keys.spec.unk_id);
  if (keys.extra) keys.extra(writer);
  return gguf::GgufFile::FromBuffer(writer.Serialize());
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const GgufTokenizerKeys& keys) {
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = WriteGguf(keys);
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(**file);
}

TEST(GgufTokenizerLoaderTest, LoadsAWrittenTokenizer) {
  GgufTokenizerKeys keys;
  keys.extra = [](gguf::GgufWriter& w) { w.AddBool("tokenizer.ggml.add_bos_token", true); };
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Load(keys);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const TokenizerInfo& info = (*tok)->info();
  EXPECT_EQ(info.pre_tokenizer, "gpt2");
  EXPECT_EQ(info.vocab_size, static_cast<int32_t>(keys.spec.tokens.size()));
  EXPECT_EQ(info.num_merges, 10);
  EXPECT_EQ(info.bos_id, 0);
  EXPECT_EQ(info.eos_id, 1);
  EXPECT_TRUE(info.add_bos);
  EXPECT_FALSE(info.add_eos);
  const TokenId hello = *(*tok)->FindToken("hello");
  EXPECT_THAT((*tok)->Encode("hello", {}), ElementsAre(0, hello));
}

TEST(GgufTokenizerLoaderTest, OptionalKeysFollowLlamaCppDefaults) {
  GgufTokenizerKeys keys;
  keys.write_pre = false;    // -> "default"
  keys.write_types = false;  // -> all normal
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Load(keys);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->info().pre_tokenizer, "default");
  EXPECT_EQ((*tok)->info().num_special, 0);
  EXPECT_FALSE((*tok)->info().add_bos);

  keys = GgufTokenizerKeys();
  keys.spec.pre_tokenizer = "llama-bpe";  // llama3 family adds BOS unless told otherwise
  tok = Load(keys);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE((*tok)->info().add_bos);
}

TEST(GgufTokenizerLoaderTest, MissingRequiredKeysAreInvalidArgumentNamingTheKey) {
  GgufTokenizerKeys keys;
  keys.write_merges = false;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Load(keys);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.merges"));

  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  auto file = gguf::GgufFile::FromBuffer(writer.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  tok = Tokenizer::FromGguf(**file);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.model"));
}

TEST(GgufTokenizerLoaderTest, UnsupportedModelAndPreAreUnimplementedAndNamed) {
  GgufTokenizerKeys keys;
  keys.spec.model = "llama";
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Load(keys);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(tok.status().message(), HasSubstr("'llama'"));

  keys = GgufTokenizerKeys();
  keys.spec.pre_tokenizer = "deepseek-coder";
  tok = Load(keys);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(tok.status().message(), HasSubstr("deepseek-coder"));
}

TEST(GgufTokenizerLoaderTest, InconsistentDataIsInvalidArgumentNamingTheKey) {
  GgufTokenizerKeys keys;
  keys.spec.token_types.pop_back();
  EXPECT_THAT(Load(keys).status().message(), HasSubstr("tokenizer.ggml.token_type"));

  keys = GgufTokenizerKeys();
  keys.spec.bos_id = 1 << 20;
  EXPECT_THAT(Load(keys).status().message(), HasSubstr("tokenizer.ggml.bos_token_id"));

  keys = GgufTokenizerKeys();
  keys.spec.merges.push_back("q zz");
  EXPECT_THAT(Load(keys).status().message(), HasSubstr("tokenizer.ggml.merges"));

  keys = GgufTokenizerKeys();
  keys.spec.unknown_bytes_to_unk = true;  // asks for an unk that the spec does not have
  EXPECT_THAT(BpeTokenizer::Create(keys.spec).status().message(),
              HasSubstr("tokenizer.ggml.unknown_token_id"));
}

TEST(GgufTokenizerLoaderTest, BytesWithoutSymbolsAreDroppedLikeLlamaCpp) {
  GgufTokenizerKeys keys;
  keys.spec.tokens[5 + 'A'] = "<not A>";  // byte 'A' has no symbol
  keys.spec.unk_id = 4;                   // present, but llama.cpp does not use it for BPE
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Load(keys);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("AbA", {}), (*tok)->Encode("b", {}));
}

TEST(GgufTokenizerLoaderTest, WrongValueTypesAreInvalidArgumentNamingTheKey) {
  GgufTokenizerKeys keys;
  keys.write_types = false;
  keys.extra = [](gguf::GgufWriter& w) {
    w.AddStringArray("tokenizer.ggml.token_type", {"normal"});
  };
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Load(keys);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.token_type"));

  keys = GgufTokenizerKeys();
  keys.extra = [](gguf::GgufWriter& w) { w.AddString("tokenizer.ggml.add_eos_token", "yes"); };
  EXPECT_THAT(Load(keys).status().message(), HasSubstr("tokenizer.ggml.add_eos_token"));

  keys = GgufTokenizerKeys();
  keys.extra = [](gguf::GgufWriter& w) { w.AddInt32("tokenizer.ggml.unknown_token_id", -7); };
  EXPECT_THAT(Load(keys).status().message(), HasSubstr("tokenizer.ggml.unknown_token_id"));
}

TEST(GgufTokenizerLoaderTest, ReadSpecRoundTripsATrainedSpec) {
  GgufTokenizerKeys keys;
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = WriteGguf(keys);
  ASSERT_TRUE(file.ok());
  absl::StatusOr<BpeSpec> spec = ReadBpeSpecFromGguf(**file);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tokens, keys.spec.tokens);
  EXPECT_EQ(spec->token_types, keys.spec.token_types);
  EXPECT_EQ(spec->merges, keys.spec.merges);
  EXPECT_EQ(spec->bos_id, keys.spec.bos_id);
  EXPECT_EQ(spec->pad_id, -1);
}

}  // namespace
}  // namespace tessera::tokenizer
