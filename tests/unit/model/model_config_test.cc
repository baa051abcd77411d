#include "common/model/model_config.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/gguf/gguf_writer.h"

namespace tessera::model {
namespace {

using ::testing::HasSubstr;

constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> Parse(const gguf::GgufWriter& writer) {
  return gguf::GgufFile::FromBuffer(writer.Serialize());
}

gguf::GgufWriter MinimalLlama() {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  writer.AddUint32("llama.block_count", 2);
  writer.AddUint32("llama.embedding_length", 64);
  writer.AddUint32("llama.feed_forward_length", 128);
  writer.AddUint32("llama.attention.head_count", 4);
  writer.AddUint32("llama.context_length", 256);
  writer.AddUint32("llama.vocab_size", 300);
  return writer;
}

TEST(ModelConfig, ReadsTheDefaultModelAsItsMetadataSays) {
  ASSERT_TRUE(std::filesystem::exists(kDefaultModel))
      << kDefaultModel << " is missing: run scripts/fetch_model.sh";
  auto file = gguf::GgufFile::Open(kDefaultModel);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "llama");
  EXPECT_EQ(config->num_layers, 30);
  EXPECT_EQ(config->hidden_size, 576);
  EXPECT_EQ(config->ffn_size, 1536);
  EXPECT_EQ(config->num_heads, 9);
  EXPECT_EQ(config->num_kv_heads, 3);
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_EQ(config->rope_dim, 64);
  EXPECT_EQ(config->context_length, 8192);
  EXPECT_EQ(config->vocab_size, 49152);
  EXPECT_DOUBLE_EQ(config->rope_theta, 100000.0);
  EXPECT_NEAR(config->rms_norm_eps, 1e-5, 1e-12);
  EXPECT_TRUE(config->tied_embeddings);
}

TEST(ModelConfig, DefaultsKvHeadsHeadDimAndRope) {
  auto file = Parse(MinimalLlama());
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_kv_heads, 4);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->rope_dim, 16);
  EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
}

TEST(ModelConfig, MissingRequiredKeyIsNamed) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  writer.AddUint32("llama.embedding_length", 64);
  auto file = Parse(writer);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("llama.block_count"));
}

TEST(ModelConfig, RejectsKvHeadsThatDoNotDivideHeads) {
  gguf::GgufWriter writer = MinimalLlama();
  writer.AddUint32("llama.attention.head_count_kv", 3);
  auto file = Parse(writer);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("head_count_kv 3"));
}

TEST(ModelConfig, RejectsZeroLayers) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "qwen2");
  writer.AddUint32("qwen2.block_count", 0);
  auto file = Parse(writer);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("qwen2.block_count"));
}

}  // namespace
}  // namespace tessera::model
