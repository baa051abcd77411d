// Binding a model's declared weights for the cpu kernels: the tiny generated model
// (F32/F16/Q8_0/Q4_1 tensors, so both the mmapped and the dequantized-at-load paths), and
// rejection of what we cannot run.
#include "tests/unique_temp_path.h"
#include "worker/cpu/cpu_model_weights.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/gguf/gguf_writer.h"
#include "tools/convert/tiny_model.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"
#include "worker/models/model_plan.h"
#include "worker/offline_generation.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

TEST(CpuModelWeightsTest, TinyModelLoadsAndGeneratesDeterministically) {
  const std::string path = testing_util::UniqueTempPath("weights_tiny.gguf");
  ASSERT_TRUE(convert::WriteTinyLlamaGguf({.num_layers = 2, .seed = 5}, path).ok());
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  // F16 matrices are dequantized at load; the quantized ones stay in the file.
  EXPECT_GT((*model)->weights->num_dequantized_bytes, 0);
  kernels::cpu::ThreadPool pool(2);
  auto generate = [&] {
    CpuModelRunner runner((*model)->config, &(*model)->plan, (*model)->weights.get(), &pool,
                          {.block_size = 4, .num_kv_blocks = 16});
    GenerationRequest request{.prompt = {5, 6, 7, 8, 9}, .max_tokens = 10};
    request.sampling.temperature = 0.0f;
    auto result = GenerateOffline(runner, request, nullptr);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->tokens : std::vector<int32_t>{};
  };
  const std::vector<int32_t> first = generate();
  EXPECT_EQ(first.size(), 10u);
  EXPECT_EQ(first, generate());
}

TEST(CpuModelWeightsTest, RejectsUnsupportedArchitectureByName) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "mamba");
  auto file = gguf::GgufFile::FromBuffer(writer.Serialize());
  ASSERT_TRUE(file.ok());
  model::ModelConfig config{.architecture = "mamba"};
  auto plan = PlanModel(config);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(plan.status().message(), HasSubstr("'mamba'"));
}

TEST(CpuModelWeightsTest, MissingTensorIsNamed) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  auto file = gguf::GgufFile::FromBuffer(writer.Serialize());
  ASSERT_TRUE(file.ok());
  model::ModelConfig config{.architecture = "llama", .num_layers = 1, .hidden_size = 32,
                            .ffn_size = 32, .num_heads = 1, .num_kv_heads = 1, .head_dim = 32,
                            .vocab_size = 10};
  auto plan = PlanModel(config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto weights = BindCpuWeights(**file, plan->weights);
  EXPECT_EQ(weights.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(weights.status().message(), HasSubstr("token_embd.weight"));
}

}  // namespace
}  // namespace tessera::worker
