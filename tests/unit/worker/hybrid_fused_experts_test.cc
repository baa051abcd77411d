// llama.cpp's fused expert storage: an MoE hybrid whose layers hold ffn_gate_up_exps (each
// expert's gate rows, then its up rows) instead of ffn_gate_exps + ffn_up_exps loads and gives the
// separate file's logits bit for bit on the cpu runner (tests/testing/fused_experts_gguf.h writes
// the fused copy of each MoE fixture).
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/fused_experts_gguf.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::worker {
namespace {

std::vector<float> PromptLogits(const LoadedModel& model) {
  kernels::cpu::ThreadPool pool(2);
  CpuModelRunner runner(model.config, &model.plan, model.weights.get(), &pool,
                        CpuRunnerOptions{.block_size = 16, .num_kv_blocks = 8, .max_num_seqs = 1});
  std::vector<int32_t> prompt;
  for (int i = 0; i < 70; ++i) prompt.push_back(3 + (i * 7919) % 250);
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  runner.BeginSequence(0, greedy, prompt, {});
  const std::vector<int32_t> table = {1, 2, 3, 4, 5};
  const SequenceWork work{.tokens = prompt, .start_pos = 0, .block_table = table,
                          .needs_logits = true, .slot = 0};
  StepLogits logits;
  EXPECT_TRUE(runner.Forward({&work, 1}, &logits).ok());
  return logits.values;
}

class HybridFusedExpertsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HybridFusedExpertsTest, TheFusedGateUpStackGivesTheSeparateTensorsLogitsBitForBit) {
  const std::string source = std::string("tests/data/hybrid/") + GetParam();
  const std::string fused_path = ::testing::TempDir() + "/fused-" + GetParam();
  ASSERT_TRUE(testing_util::WriteFusedGateUpCopy(source, fused_path).ok());
  auto separate = LoadModel(source);
  auto fused = LoadModel(fused_path);
  ASSERT_TRUE(separate.ok()) << separate.status();
  ASSERT_TRUE(fused.ok()) << fused.status();
  const auto& plan = std::get<HybridPlan>((*fused)->plan.body);
  EXPECT_TRUE(plan.forms.moe_fused_gate_up);
  EXPECT_NE(plan.layers[0].moe.gate_up_exps, kNoWeight);
  EXPECT_EQ(plan.layers[0].moe.gate_exps, kNoWeight);
  const std::vector<float> expected = PromptLogits(**separate);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(PromptLogits(**fused), expected);
}

INSTANTIATE_TEST_SUITE_P(MoeFixtures, HybridFusedExpertsTest,
                         ::testing::Values("tiny-qwen35moe.gguf", "tiny-qwen3next.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param).find("next") != std::string::npos
                                      ? std::string("qwen3next")
                                      : std::string("qwen35moe");
                         });

}  // namespace
}  // namespace tessera::worker
