// The committed oracle fixtures (tests/data/hybrid/, written by tools/oracle/
// make_hybrid_fixtures.py from llama.cpp's converter conventions) against our config reader and
// tensor checker (written from llama.cpp's loaders): two independent readings of the same facts.
// Each file must read as its oracle wrote it: 3 GDN layers then 1 attention layer, the value-head
// order of its variant (qwen35*: tiled; qwen3next: grouped), the experts of the MoE variants,
// and every tensor in place with llama.cpp's shape.
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "common/gguf/gguf_file.h"
#include "common/model/hybrid_tensors.h"
#include "common/model/model_config.h"

namespace tessera::model {
namespace {

struct Expected {
  const char* file;
  GdnHeadOrder head_order;
  int num_experts;  // 0 = dense
};

class HybridFixtureFilesTest : public ::testing::TestWithParam<Expected> {};

TEST_P(HybridFixtureFilesTest, ReadsAsTheOracleWroteIt) {
  const Expected& expected = GetParam();
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file =
      gguf::GgufFile::Open(std::string("tests/data/hybrid/") + expected.file);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<ModelConfig> config = ReadModelConfig(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->hybrid.has_value());
  const HybridLayout& layout = *config->hybrid;
  ASSERT_EQ(layout.layer_kinds.size(), 4u);
  for (int layer = 0; layer < 3; ++layer) {
    EXPECT_EQ(layout.layer_kinds[layer], LayerKind::kGatedDeltaNet) << layer;
  }
  EXPECT_EQ(layout.layer_kinds[3], LayerKind::kAttention);
  EXPECT_EQ(layout.gdn.conv_kernel, 4);
  EXPECT_EQ(layout.gdn.num_k_heads, 2);
  EXPECT_EQ(layout.gdn.num_v_heads, 4);
  EXPECT_EQ(layout.gdn.head_k_dim, 16);
  EXPECT_EQ(layout.gdn.head_v_dim, 16);
  EXPECT_EQ(layout.gdn.head_order, expected.head_order);
  EXPECT_EQ(config->head_dim, 32);
  EXPECT_EQ(config->rope_dim, 8);
  EXPECT_EQ(layout.moe.has_value(), expected.num_experts > 0);
  if (layout.moe.has_value()) {
    EXPECT_EQ(layout.moe->num_experts, expected.num_experts);
    EXPECT_EQ(layout.moe->num_experts_used, 2);
  }
  absl::StatusOr<HybridTensorForms> forms = CheckHybridTensors(**file, *config);
  EXPECT_TRUE(forms.ok()) << forms.status();
}

INSTANTIATE_TEST_SUITE_P(
    Oracle, HybridFixtureFilesTest,
    ::testing::Values(Expected{"tiny-qwen35.gguf", GdnHeadOrder::kTiled, 0},
                      Expected{"tiny-qwen35moe.gguf", GdnHeadOrder::kTiled, 8},
                      Expected{"tiny-qwen3next.gguf", GdnHeadOrder::kGrouped, 8}));

}  // namespace
}  // namespace tessera::model
