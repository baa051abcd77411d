// Binding a model's declared weights in host memory (worker/models/host_model_weights.h): the
// tiny generated model (F32/F16/Q8_0/Q4_1 tensors, so both the mmapped and the
// dequantized-at-load paths), MXFP4/NVFP4 matrices (mmapped, same tokens as their f32 values),
// and rejection of what we cannot run; generation through the cpu runner.
#include "tests/unique_temp_path.h"
#include "worker/models/host_model_weights.h"

#include <filesystem>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_writer.h"
#include "tools/convert/tiny_model.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"
#include "worker/models/model_plan.h"
#include "worker/offline_generation.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

TEST(HostModelWeightsTest, TinyModelLoadsAndGeneratesDeterministically) {
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

// The shape of the FP4 tests' model.
model::ModelConfig OneLayerLlama() {
  return {.architecture = "llama", .num_layers = 1, .hidden_size = 64, .ffn_size = 128,
          .num_heads = 2, .num_kv_heads = 1, .head_dim = 32, .rope_dim = 32,
          .context_length = 64, .vocab_size = 16};
}

// The tensor scale Fp4Llama writes: a power of two, so s·(x·w) and x·(s·w) are the same bits.
constexpr float kTensorScale = 0.25f;

// A one-layer llama whose matrices (embedding included) are MXFP4 or NVFP4, or, with
// `as_f32`, the same matrices dequantized to F32; norms are F32 ones. `extra_scale`: also a
// per-tensor scale tensor of that name (kTensorScale), as llama.cpp's converter writes beside
// NVFP4 matrices; the F32 copy of its matrix is multiplied by it.
std::vector<uint8_t> Fp4Llama(const WeightDeclaration& declaration, bool as_f32,
                              const std::string& extra_scale = "") {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  if (!extra_scale.empty()) {
    writer.AddTensor(extra_scale, {1}, gguf::GgmlType::kF32,
                     {reinterpret_cast<const uint8_t*>(&kTensorScale), sizeof(kTensorScale)});
  }
  const std::string scaled_matrix =
      extra_scale.empty() ? "" : extra_scale.substr(0, extra_scale.size() - 6) + ".weight";
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (int i = 0; i < declaration.size(); ++i) {
    const WeightSpec& spec = declaration.spec(i);
    const size_t n = static_cast<size_t>(spec.elements());
    if (spec.role == WeightRole::kDense) {
      const std::vector<float> ones(n, 1.0f);
      writer.AddTensor(spec.name, spec.dims, gguf::GgmlType::kF32,
                       {reinterpret_cast<const uint8_t*>(ones.data()), n * sizeof(float)});
      continue;
    }
    std::vector<float> values(n);
    for (float& v : values) v = normal(rng);
    const gguf::GgmlType type = i % 2 == 0 ? gguf::GgmlType::kNvfp4 : gguf::GgmlType::kMxfp4;
    const std::vector<uint8_t> blocks = *gguf::QuantizeFromF32(type, values);
    if (!as_f32) {
      writer.AddTensor(spec.name, spec.dims, type, blocks);
      continue;
    }
    std::vector<float> f32 = *gguf::DequantizeToF32(type, blocks, n);
    if (spec.name == scaled_matrix) {
      for (float& v : f32) v *= kTensorScale;
    }
    writer.AddTensor(spec.name, spec.dims, gguf::GgmlType::kF32,
                     {reinterpret_cast<const uint8_t*>(f32.data()), n * sizeof(float)});
  }
  return writer.Serialize();
}

// MXFP4/NVFP4 matrices are bound in place (no f32 copy), and generating from them gives the
// tokens the same weights give as F32: the packed matmul is exact.
TEST(HostModelWeightsTest, Fp4MatricesStayPacked) {
  const model::ModelConfig config = OneLayerLlama();
  auto plan = PlanModel(config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto packed_file = gguf::GgufFile::FromBuffer(Fp4Llama(plan->weights, false));
  auto f32_file = gguf::GgufFile::FromBuffer(Fp4Llama(plan->weights, true));
  ASSERT_TRUE(packed_file.ok() && f32_file.ok());
  auto packed = BindHostWeights(**packed_file, plan->weights);
  auto f32 = BindHostWeights(**f32_file, plan->weights);
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ((*packed)->num_dequantized_bytes, 0);
  int fp4_matrices = 0;
  for (int i = 0; i < plan->weights.size(); ++i) {
    const HostWeight& w = (**packed)[i];
    if (w.role == WeightRole::kDense) continue;
    const gguf::GgufTensorInfo* info = (*packed_file)->FindTensor(plan->weights.spec(i).name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(w.matrix.format, i % 2 == 0 ? kernels::cpu::WeightFormat::kNvfp4
                                           : kernels::cpu::WeightFormat::kMxfp4);
    EXPECT_EQ(w.matrix.data, (*packed_file)->TensorData(*info).data());  // the file's bytes
    ++fp4_matrices;
  }
  EXPECT_GE(fp4_matrices, 8);  // embedding, q, k, v, output, gate, up, down
  kernels::cpu::ThreadPool pool(2);
  auto generate = [&](const HostModelWeights* weights) {
    CpuModelRunner runner(config, &*plan, weights, &pool, {.block_size = 4, .num_kv_blocks = 16});
    GenerationRequest request{.prompt = {1, 2, 3, 4, 5}, .max_tokens = 12};
    request.sampling.temperature = 0.0f;
    auto result = GenerateOffline(runner, request, nullptr);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->tokens : std::vector<int32_t>{};
  };
  const std::vector<int32_t> tokens = generate(packed->get());
  EXPECT_EQ(tokens.size(), 12u);
  EXPECT_EQ(tokens, generate(f32->get()));
}

// An NVFP4 matrix's per-tensor scale (`X.scale` beside `X.weight`) is part of the weight and
// multiplies its output: generating gives the tokens of the F32 model whose matrix is scaled.
// Beside an embedding table, which no lookup scales yet, it is refused by name, not ignored.
TEST(HostModelWeightsTest, AppliesAnNvfp4MatrixScaleAndRefusesAnEmbeddingOne) {
  const model::ModelConfig config = OneLayerLlama();
  auto plan = PlanModel(config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Fp4Llama makes even-numbered declarations NVFP4: the first is the embedding table, the next
  // matrix one a projection.
  std::vector<std::string> nvfp4;
  for (int i = 0; i < plan->weights.size(); i += 2) {
    if (plan->weights.spec(i).role != WeightRole::kDense) nvfp4.push_back(plan->weights.spec(i).name);
  }
  ASSERT_GE(nvfp4.size(), 2u);
  ASSERT_EQ(nvfp4[0], "token_embd.weight");
  const std::string matrix_scale = nvfp4[1].substr(0, nvfp4[1].size() - 7) + ".scale";
  auto file = gguf::GgufFile::FromBuffer(Fp4Llama(plan->weights, false, matrix_scale));
  auto f32_file = gguf::GgufFile::FromBuffer(Fp4Llama(plan->weights, true, matrix_scale));
  ASSERT_TRUE(file.ok() && f32_file.ok());
  auto packed = BindHostWeights(**file, plan->weights);
  auto f32 = BindHostWeights(**f32_file, plan->weights);
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_TRUE(f32.ok()) << f32.status();  // an F32 matrix ignores a .scale beside it
  EXPECT_EQ((**packed)[plan->weights.Find(nvfp4[1])].tensor_scale, kTensorScale);
  kernels::cpu::ThreadPool pool(2);
  auto logits = [&](const HostModelWeights* weights) {  // the prompt's last-position logits
    CpuModelRunner runner(config, &*plan, weights, &pool, {.block_size = 4, .num_kv_blocks = 16});
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5}, table = {1, 2};
    const SequenceWork work{.tokens = prompt, .start_pos = 0, .block_table = table,
                            .needs_logits = true};
    StepLogits out;
    EXPECT_TRUE(runner.Forward({&work, 1}, &out).ok());
    return std::vector<float>(out.Row(0).begin(), out.Row(0).end());
  };
  EXPECT_EQ(logits(packed->get()), logits(f32->get()));  // bit for bit: the scale is 2^-2

  const std::string embedding_scale = "token_embd.scale";
  auto embedding_file = gguf::GgufFile::FromBuffer(Fp4Llama(plan->weights, false, embedding_scale));
  ASSERT_TRUE(embedding_file.ok());
  auto refused = BindHostWeights(**embedding_file, plan->weights);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(refused.status().message(), HasSubstr("'" + embedding_scale + "'"));
}

TEST(HostModelWeightsTest, RejectsUnsupportedArchitectureByName) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "mamba");
  auto file = gguf::GgufFile::FromBuffer(writer.Serialize());
  ASSERT_TRUE(file.ok());
  model::ModelConfig config{.architecture = "mamba"};
  auto plan = PlanModel(config);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(plan.status().message(), HasSubstr("'mamba'"));
}

TEST(HostModelWeightsTest, MissingTensorIsNamed) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  auto file = gguf::GgufFile::FromBuffer(writer.Serialize());
  ASSERT_TRUE(file.ok());
  model::ModelConfig config{.architecture = "llama", .num_layers = 1, .hidden_size = 32,
                            .ffn_size = 32, .num_heads = 1, .num_kv_heads = 1, .head_dim = 32,
                            .vocab_size = 10};
  auto plan = PlanModel(config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto weights = BindHostWeights(**file, plan->weights);
  EXPECT_EQ(weights.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(weights.status().message(), HasSubstr("token_embd.weight"));
}

}  // namespace
}  // namespace tessera::worker
