// The synthetic model shapes (--load-format dummy): the real ones carry their published
// config.json values, every shape is one the runners accept, unknown names list the known ones,
// and a vocabulary override keeps BOS/EOS inside it.
#include "common/model/synthetic_shapes.h"
#include "common/model/hybrid_layout.h"

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
    EXPECT_EQ(c.num_heads % c.num_kv_heads, 0) << name;
    // Head sizes the attention kernels are built for.
    EXPECT_TRUE(c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256) << name;
    if (c.hybrid.has_value()) {  // gated attention: its heads need not tile hidden
      const HybridLayout& h = *c.hybrid;
      EXPECT_EQ(static_cast<int>(h.layer_kinds.size()), c.num_layers) << name;
      EXPECT_GT(CountLayers(h, LayerKind::kAttention), 0) << name;
      EXPECT_EQ(h.gdn.num_v_heads % h.gdn.num_k_heads, 0) << name;
      EXPECT_LE(c.rope_dim, c.head_dim) << name;
    } else {
      EXPECT_EQ(c.hidden_size, c.num_heads * c.head_dim) << name;
      EXPECT_EQ(c.rope_dim, c.head_dim) << name;
    }
    EXPECT_GE(m->bos_token_id, 0) << name;
    EXPECT_LT(m->bos_token_id, c.vocab_size) << name;
    EXPECT_GE(m->eos_token_id, 0) << name;
    EXPECT_LT(m->eos_token_id, c.vocab_size) << name;
  }
  EXPECT_EQ(MakeSyntheticModel("tiny")->config.head_dim, 64);
}

// Qwen3-Next-80B-A3B's published widths, 12 of its 48 layers (every 4th attends).
TEST(SyntheticShapes, Qwen3NextShapeHasThePublishedWidths) {
  absl::StatusOr<SyntheticModel> m = MakeSyntheticModel("qwen3-next-80b-a3b-l12");
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "qwen3next");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rope_dim, 64);
  ASSERT_TRUE(c.hybrid.has_value());
  EXPECT_EQ(CountLayers(*c.hybrid, LayerKind::kAttention), 3);
  EXPECT_EQ(c.hybrid->layer_kinds[3], LayerKind::kAttention);
  EXPECT_EQ(c.hybrid->gdn.num_k_heads, 16);
  EXPECT_EQ(c.hybrid->gdn.num_v_heads, 32);
  EXPECT_EQ(c.hybrid->gdn.head_k_dim, 128);
  ASSERT_TRUE(c.hybrid->moe.has_value());
  EXPECT_EQ(c.hybrid->moe->num_experts, 512);
  EXPECT_EQ(c.hybrid->moe->num_experts_used, 10);
  EXPECT_EQ(c.hybrid->moe->expert_ffn_size, 512);
}

TEST(SyntheticShapes, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<SyntheticModel> m = MakeSyntheticModel("llama-9");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(),
              HasSubstr("unknown synthetic model shape 'llama-9' (known: llama-3.1-8b, "
                        "qwen2.5-1.5b, tiny, qwen3-next-80b-a3b-l12, tiny-hybrid)"));
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
