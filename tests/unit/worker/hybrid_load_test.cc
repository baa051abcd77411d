// LoadModel on hybrid Gated-DeltaNet files (issue 30): a malformed file is one error naming the
// key or tensor, before any weight is bound; a well-formed one loads with the hybrid plan (its
// layer counts, every declared weight bound). (Both backends run it: hybrid_oracle_test,
// cuda_hybrid_runner_test.)
#include <string>
#include <variant>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/tiny_hybrid_gguf.h"
#include "worker/loaded_model.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

TEST(HybridLoadTest, AMissingTensorIsOneErrorNamingIt) {
  testing_util::TinyHybridGguf file("qwen35moe");
  file.RemoveTensor("blk.1.ssm_a");
  const std::string path = TempPath("no_ssm_a.gguf");
  ASSERT_TRUE(file.WriteToFile(path).ok());
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(path);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("blk.1.ssm_a: missing"));
}

TEST(HybridLoadTest, AZeroConvKernelIsOneErrorNamingTheKey) {
  testing_util::TinyHybridGguf file("qwen3next");
  file.SetUint32("qwen3next.ssm.conv_kernel", 0);
  const std::string path = TempPath("conv0.gguf");
  ASSERT_TRUE(file.WriteToFile(path).ok());
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(path);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("ssm.conv_kernel"));
}

TEST(HybridLoadTest, AWellFormedFileLoadsWithItsHybridPlan) {
  absl::StatusOr<std::unique_ptr<LoadedModel>> model =
      LoadModel("tests/data/hybrid/tiny-qwen35moe.gguf");
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelPlan& plan = (*model)->plan;
  EXPECT_TRUE(std::holds_alternative<HybridPlan>(plan.body));
  EXPECT_EQ(plan.num_attention_layers, 1);
  EXPECT_EQ(plan.num_linear_layers, 3);
  ASSERT_EQ(static_cast<int>((*model)->weights->tensors.size()), plan.weights.size());
  for (WeightId id = 0; id < plan.weights.size(); ++id) {
    const WeightSpec& spec = plan.weights.spec(id);
    EXPECT_TRUE((*(*model)->weights)[id].present || spec.optional) << spec.name;
  }
  const WeightId experts = plan.weights.Find("blk.0.ffn_gate_exps.weight");
  ASSERT_NE(experts, kNoWeight);
  EXPECT_EQ((*(*model)->weights)[experts].experts.num_experts, 8);
}

}  // namespace
}  // namespace tessera::worker
