// The synthetic model shapes (--load-format dummy): the real ones carry their published
// config.json values, every shape is one the runners accept, unknown names list the known ones,
// and a vocabulary override keeps BOS/EOS inside it.
#include "common/model/synthetic_shapes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"

namespace tessera::model {
namespace {

using ::testing::HasSubstr;

TEST(SyntheticShapes, Llama31_8bIsItsPublishedConfig) {
  absl::StatusOr<SyntheticModel> m = MakeSyntheticModel("llama-3.1-8b");
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.ffn_size, 14336);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_FALSE(c.rope_neox);
  EXPECT_FALSE(m->qkv_bias);
  EXPECT_EQ(c.context_length, 32768);  // capped from 131072 (synthetic_shapes.cc says why)
  EXPECT_EQ(m->bos_token_id, 128000);
  EXPECT_EQ(m->eos_token_id, 128001);
}

TEST(SyntheticShapes, Qwen25_1_5bIsItsPublishedConfig) {
  absl::StatusOr<SyntheticModel> m = MakeSyntheticModel("qwen2.5-1.5b");
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.hidden_size, 1536);
  EXPECT_EQ(c.num_layers, 28);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.ffn_size, 8960);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_TRUE(m->qkv_bias);
  EXPECT_EQ(c.context_length, 32768);
  EXPECT_EQ(m->eos_token_id, 151645);
}

TEST(SyntheticShapes, EveryShapeIsARunnableGeometry) {
  for (absl::string_view name : absl::StrSplit(SyntheticShapeNames(), ", ")) {
    absl::StatusOr<SyntheticModel> m = MakeSyntheticModel(std::string(name));
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    const ModelConfig& c = m->config;
    EXPECT_EQ(c.hidden_size, c.num_heads * c.head_dim) << name;
    EXPECT_EQ(c.num_heads % c.num_kv_heads, 0) << name;
    EXPECT_TRUE(c.head_dim == 64 || c.head_dim == 128) << name;  // the attention kernels'
    EXPECT_EQ(c.rope_dim, c.head_dim) << name;
    EXPECT_GE(m->bos_token_id, 0) << name;
    EXPECT_LT(m->bos_token_id, c.vocab_size) << name;
    EXPECT_GE(m->eos_token_id, 0) << name;
    EXPECT_LT(m->eos_token_id, c.vocab_size) << name;
  }
  EXPECT_EQ(MakeSyntheticModel("tiny")->config.head_dim, 64);
}

TEST(SyntheticShapes, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<SyntheticModel> m = MakeSyntheticModel("llama-9");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(),
              HasSubstr("unknown synthetic model shape 'llama-9' (known: llama-3.1-8b, "
                        "qwen2.5-1.5b, tiny)"));
}

TEST(SyntheticShapes, AVocabularyOverrideKeepsBosAndEosInside) {
  absl::StatusOr<SyntheticModel> m = MakeSyntheticModel("qwen2.5-1.5b", 49152);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.vocab_size, 49152);
  EXPECT_EQ(m->bos_token_id, 49150);
  EXPECT_EQ(m->eos_token_id, 49151);
  // Ids the smaller vocabulary still holds stay.
  absl::StatusOr<SyntheticModel> tiny = MakeSyntheticModel("tiny", 100);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(tiny->bos_token_id, 1);
  EXPECT_EQ(tiny->eos_token_id, 2);
  EXPECT_EQ(MakeSyntheticModel("tiny", 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::model
