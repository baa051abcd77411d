// CheckHybridTensors against llama.cpp's tensor layout for qwen3next / qwen35 / qwen35moe: a
// consistent file passes, and each missing or misshapen tensor is one line naming it.
#include "common/model/hybrid_tensors.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/model/model_config.h"
#include "tests/testing/tiny_hybrid_gguf.h"

namespace tessera::model {
namespace {

using ::testing::HasSubstr;
using testing_util::TinyHybridGguf;

// The tensor check's result for `fixture` (whose metadata must be valid).
absl::StatusOr<HybridTensorForms> Check(const TinyHybridGguf& fixture) {
  auto file = fixture.Parse();
  if (!file.ok()) return file.status();
  auto config = ReadModelConfig(**file);
  if (!config.ok()) return config.status();
  return CheckHybridTensors(**file, *config);
}

std::string ErrorOf(const TinyHybridGguf& fixture) {
  absl::StatusOr<HybridTensorForms> forms = Check(fixture);
  EXPECT_FALSE(forms.ok());
  if (forms.ok()) return "";
  EXPECT_EQ(forms.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(forms.status().message());
}

class HybridTensors : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(All, HybridTensors,
                         ::testing::Values("qwen3next", "qwen35", "qwen35moe"));

TEST_P(HybridTensors, LlamaCppLayoutPasses) {
  absl::StatusOr<HybridTensorForms> forms = Check(TinyHybridGguf(GetParam()));
  ASSERT_TRUE(forms.ok()) << forms.status();
  EXPECT_FALSE(forms->gdn_fused_qkvz);
  EXPECT_FALSE(forms->moe_fused_gate_up);
}

TEST_P(HybridTensors, MissingSsmAIsNamed) {
  TinyHybridGguf fixture(GetParam());
  fixture.RemoveTensor("blk.2.ssm_a");
  EXPECT_EQ(ErrorOf(fixture), "blk.2.ssm_a: missing");
}

TEST_P(HybridTensors, EachGdnTensorIsRequired) {
  const std::string arch = GetParam();
  std::vector<std::string> names = {"attn_qkv.weight", "attn_gate.weight", "ssm_conv1d.weight",
                                    "ssm_dt.bias", "ssm_a", "ssm_norm.weight", "ssm_out.weight"};
  if (arch == "qwen3next") {
    names.push_back("ssm_ba.weight");
  } else {
    names.insert(names.end(), {"ssm_beta.weight", "ssm_alpha.weight"});
  }
  for (const std::string& name : names) {
    TinyHybridGguf fixture(arch);
    const std::string tensor = "blk.5." + name;
    ASSERT_TRUE(fixture.HasTensor(tensor)) << tensor;
    fixture.RemoveTensor(tensor);
    EXPECT_EQ(ErrorOf(fixture), tensor + ": missing");
  }
}

TEST_P(HybridTensors, EachAttentionTensorIsRequired) {
  for (const char* name : {"attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
                           "attn_k_norm"}) {
    TinyHybridGguf fixture(GetParam());
    const std::string tensor = absl::StrCat("blk.7.", name, ".weight");
    fixture.RemoveTensor(tensor);
    EXPECT_EQ(ErrorOf(fixture), tensor + ": missing");
  }
}

TEST_P(HybridTensors, FfnTensorsFollowTheVariant) {
  const std::string arch = GetParam();
  std::vector<std::string> names = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
  if (arch != "qwen35") {
    names = {"ffn_gate_inp.weight",       "ffn_gate_exps.weight",   "ffn_up_exps.weight",
             "ffn_down_exps.weight",      "ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight",
             "ffn_up_shexp.weight",       "ffn_down_shexp.weight"};
  }
  for (const std::string& name : names) {
    TinyHybridGguf fixture(arch);
    const std::string tensor = "blk.4." + name;
    fixture.RemoveTensor(tensor);
    EXPECT_EQ(ErrorOf(fixture), tensor + ": missing");
  }
}

TEST_P(HybridTensors, WrongShapeShowsBothShapes) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetTensorDims("blk.1.ssm_conv1d.weight", {3, 64});
  EXPECT_EQ(ErrorOf(fixture), "blk.1.ssm_conv1d.weight: shape [3, 64], expected [4, 64]");
}

// attn_q carries the output gate: a plain (ungated) query projection is the wrong width.
TEST_P(HybridTensors, AttentionQueryMustHoldTheGate) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetTensorDims("blk.3.attn_q.weight", {32, 64});
  EXPECT_EQ(ErrorOf(fixture), "blk.3.attn_q.weight: shape [32, 64], expected [32, 128]");
}

TEST_P(HybridTensors, TrailingOnesDoNotCount) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetTensorDims("blk.0.attn_norm.weight", {32, 1});
  EXPECT_TRUE(Check(fixture).ok());
}

TEST_P(HybridTensors, NoOutputMeansTiedEmbeddings) {
  TinyHybridGguf fixture(GetParam());
  fixture.RemoveTensor("output.weight");
  EXPECT_TRUE(Check(fixture).ok());
  fixture.RemoveTensor("token_embd.weight");
  EXPECT_EQ(ErrorOf(fixture), "token_embd.weight: missing");
}

// Metadata that puts attention where the file has GDN weights: the first disagreeing layer.
TEST_P(HybridTensors, LayoutThatDisagreesWithTheTensors) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetUint32(fixture.Key("full_attention_interval"), 2);
  EXPECT_EQ(ErrorOf(fixture), "blk.1.attn_q.weight: missing");
}

TEST(HybridTensorForms, Qwen3NextAcceptsTheLegacyFusedInputProjection) {
  TinyHybridGguf fixture("qwen3next");
  for (int layer : {0, 1, 2, 4, 5, 6}) {
    fixture.RemoveTensor(absl::StrCat("blk.", layer, ".attn_qkv.weight"));
    fixture.RemoveTensor(absl::StrCat("blk.", layer, ".attn_gate.weight"));
    // [hidden, 2 * key dim + 2 * value dim] = [32, 2 * 16 + 2 * 32]
    fixture.SetTensorDims(absl::StrCat("blk.", layer, ".ssm_in.weight"), {32, 96});
  }
  absl::StatusOr<HybridTensorForms> forms = Check(fixture);
  ASSERT_TRUE(forms.ok()) << forms.status();
  EXPECT_TRUE(forms->gdn_fused_qkvz);
  // The choice holds for every layer: a layer left in the other form is named.
  fixture.RemoveTensor("blk.6.ssm_in.weight");
  fixture.SetTensorDims("blk.6.attn_qkv.weight", {32, 64});
  fixture.SetTensorDims("blk.6.attn_gate.weight", {32, 32});
  EXPECT_EQ(ErrorOf(fixture), "blk.6.ssm_in.weight: missing");
}

TEST(HybridTensorForms, Qwen35HasNoLegacyInputProjection) {
  TinyHybridGguf fixture("qwen35");
  fixture.RemoveTensor("blk.0.attn_qkv.weight");
  fixture.SetTensorDims("blk.0.ssm_in.weight", {32, 96});
  EXPECT_EQ(ErrorOf(fixture), "blk.0.attn_qkv.weight: missing");
}

TEST(HybridTensorForms, FusedGateUpExperts) {
  TinyHybridGguf fixture("qwen35moe");
  for (int layer = 0; layer < testing_util::kTinyHybridLayers; ++layer) {
    fixture.RemoveTensor(absl::StrCat("blk.", layer, ".ffn_gate_exps.weight"));
    fixture.RemoveTensor(absl::StrCat("blk.", layer, ".ffn_up_exps.weight"));
    fixture.SetTensorDims(absl::StrCat("blk.", layer, ".ffn_gate_up_exps.weight"), {32, 32, 4});
  }
  absl::StatusOr<HybridTensorForms> forms = Check(fixture);
  ASSERT_TRUE(forms.ok()) << forms.status();
  EXPECT_TRUE(forms->moe_fused_gate_up);
}

TEST(HybridTensors, NextnBlocksAreNotChecked) {
  TinyHybridGguf fixture("qwen35moe");
  fixture.SetUint32(fixture.Key("block_count"), 9);
  fixture.SetUint32(fixture.Key("nextn_predict_layers"), 1);
  EXPECT_TRUE(Check(fixture).ok());  // no blk.8.* tensors at all
}

TEST(HybridTensors, ExpectedLayerTensorsListsTheMixerAndFfn) {
  auto file = TinyHybridGguf("qwen35").Parse();
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  std::vector<std::string> names;
  for (const ExpectedTensor& t : ExpectedLayerTensors(*config, 3, HybridTensorForms{})) {
    names.push_back(t.name);
  }
  EXPECT_THAT(names, ::testing::ElementsAre(
                         "blk.3.attn_norm.weight", "blk.3.attn_q.weight", "blk.3.attn_k.weight",
                         "blk.3.attn_v.weight", "blk.3.attn_output.weight",
                         "blk.3.attn_q_norm.weight", "blk.3.attn_k_norm.weight",
                         "blk.3.post_attention_norm.weight", "blk.3.ffn_gate.weight",
                         "blk.3.ffn_up.weight", "blk.3.ffn_down.weight"));
}

}  // namespace
}  // namespace tessera::model
