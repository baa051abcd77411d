// RoPE scaling end to end in the CPU runner: GGUF metadata and the rope_freqs tensor -> ModelConfig
// and HostModelWeights -> RopeParamsForModel (llama.cpp's context parameters) -> the runner's table
// and logits. The kernel arithmetic itself is tested in tests/unit/kernels/rope_scaling_test.cc.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "tests/unique_temp_path.h"
#include "tests/unit/kernels/rope_reference.h"
#include "tools/convert/tiny_model.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"
#include "worker/models/rope_params.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;
namespace cpu = kernels::cpu;

constexpr int kTinyRopeDim = 16;     // tiny model: hidden 64 / 4 heads
constexpr int kTinyContext = 256;

// The tiny model (tools/convert/tiny_model.h) re-serialized with extra metadata and tensors,
// written to a temp file. Returns the path.
std::string WriteTinyVariant(const std::string& name,
                             const std::function<void(gguf::GgufWriter&)>& add) {
  auto bytes = convert::BuildTinyLlamaGguf({.num_layers = 2, .seed = 11});
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto base = gguf::GgufFile::FromBuffer(std::move(*bytes));
  EXPECT_TRUE(base.ok()) << base.status();
  gguf::GgufWriter writer(3, (*base)->alignment());
  for (const gguf::GgufMetadataEntry& entry : (*base)->metadata()) {
    if (entry.key != "general.alignment") writer.AddValue(entry.key, entry.value);
  }
  for (const gguf::GgufTensorInfo& t : (*base)->tensors()) {
    writer.AddTensor(t.name, t.dims, t.type, (*base)->TensorData(t));
  }
  add(writer);
  const std::string path = testing_util::UniqueTempPath(name + ".gguf");
  EXPECT_TRUE(writer.WriteToFile(path).ok());
  return path;
}

void AddRopeFreqs(gguf::GgufWriter& w, const std::vector<float>& freqs) {
  std::vector<uint8_t> data(freqs.size() * sizeof(float));
  std::memcpy(data.data(), freqs.data(), data.size());
  w.AddTensor("rope_freqs.weight", {freqs.size()}, gguf::GgmlType::kF32, data);
}

std::unique_ptr<LoadedModel> Load(const std::string& path) {
  auto model = LoadModel(path);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

bool RowsBitEqual(const cpu::RopeTable& a, int64_t pos_a, const cpu::RopeTable& b, int64_t pos_b) {
  return std::memcmp(a.CosSin(pos_a), b.CosSin(pos_b), a.rope_dim() * sizeof(float)) == 0;
}

// Last-token logits of a 40-token prompt on a fresh runner.
std::vector<float> PromptLogits(const LoadedModel& model) {
  cpu::ThreadPool pool(2);
  CpuModelRunner runner(model.config, &model.plan, model.weights.get(), &pool,
                        {.block_size = 16, .num_kv_blocks = 8});
  std::vector<int32_t> tokens(40);
  for (int i = 0; i < 40; ++i) tokens[i] = 3 + (i * 37) % 200;
  const std::vector<int32_t> blocks = {1, 2, 3};
  const SequenceWork work{.tokens = tokens, .start_pos = 0, .block_table = blocks,
                          .needs_logits = true};
  StepLogits logits;
  EXPECT_TRUE(runner.Forward({&work, 1}, &logits).ok());
  return logits.values;
}

model::ModelConfig ConfigWithScaling(model::RopeScalingType type, double factor) {
  model::ModelConfig config;
  config.rope_dim = 64;
  config.rope_theta = 10000.0;
  config.context_length = 4096;
  config.rope_scaling.type = type;
  config.rope_scaling.factor = factor;
  config.rope_scaling.original_context_length = 4096;
  return config;
}

TEST(RopeParamsForModelTest, MapsScalingToGgmlParameters) {
  const cpu::RopeParams none = RopeParamsForModel(
      ConfigWithScaling(model::RopeScalingType::kNone, 1.0), {});
  EXPECT_EQ(none.freq_scale, 1.0f);
  EXPECT_EQ(none.ext_factor, 0.0f);
  EXPECT_EQ(none.attn_factor, 1.0f);
  EXPECT_TRUE(none.freq_factors.empty());

  const cpu::RopeParams linear = RopeParamsForModel(
      ConfigWithScaling(model::RopeScalingType::kLinear, 4.0), {});
  EXPECT_EQ(linear.freq_scale, 0.25f);
  EXPECT_EQ(linear.ext_factor, 0.0f);
  EXPECT_EQ(linear.attn_factor, 1.0f);

  model::ModelConfig yarn_config = ConfigWithScaling(model::RopeScalingType::kYarn, 4.0);
  yarn_config.rope_scaling.attn_factor = 0.75;
  yarn_config.rope_scaling.yarn_beta_fast = 16.0;
  const std::vector<float> factors(32, 1.5f);
  const cpu::RopeParams yarn = RopeParamsForModel(yarn_config, factors);
  EXPECT_EQ(yarn.freq_scale, 0.25f);
  EXPECT_EQ(yarn.ext_factor, 1.0f);
  EXPECT_EQ(yarn.original_context_length, 4096);
  EXPECT_EQ(yarn.beta_fast, 16.0f);
  EXPECT_EQ(yarn.beta_slow, 1.0f);
  EXPECT_EQ(yarn.freq_factors, factors);
  // llama.cpp: get_mscale(4) / (1 + 0.1 ln 4) (~1, cancelling ggml's own YaRN magnitude), times
  // rope.scaling.attn_factor.
  EXPECT_NEAR(yarn.attn_factor, 0.75f, 1e-7f);
}

// The HF oracle cases, read through ModelConfig + RopeParamsForModel instead of kernel
// parameters: the whole metadata-to-table mapping (incl. llama.cpp's YaRN attn_factor).
TEST(RopeParamsForModelTest, OracleCasesMatchTransformers) {
  const auto cases = rope_reference::ReadRopeReference();
  ASSERT_EQ(cases.size(), 5u) << "run tools/oracle/rope_reference.py";
  for (const rope_reference::RopeReferenceCase& c : cases) {
    model::ModelConfig config;
    config.rope_dim = c.rope_dim;
    config.rope_theta = c.theta;
    config.context_length = c.positions.back() + 1;
    model::RopeScaling& s = config.rope_scaling;
    s.type = c.scaling_type == "yarn"     ? model::RopeScalingType::kYarn
             : c.scaling_type == "linear" ? model::RopeScalingType::kLinear
                                          : model::RopeScalingType::kNone;
    s.factor = c.factor;
    s.original_context_length = c.original_context_length;
    s.attn_factor = c.attn_factor;
    s.yarn_beta_fast = c.beta_fast;
    s.yarn_beta_slow = c.beta_slow;
    const cpu::RopeTable table(RopeParamsForModel(config, c.rope_freqs), config.context_length);
    for (size_t p = 0; p < c.positions.size(); ++p) {
      for (int j = 0; j < c.rope_dim; ++j) {
        ASSERT_NEAR(table.CosSin(c.positions[p])[j], c.cos_sin[p][j],
                    rope_reference::Tolerance(c.positions[p]))
            << c.name << " pos " << c.positions[p] << " value " << j;
      }
    }
  }
}

// Linear factor 2 read from GGUF: the runner's angle at 2p is the unscaled angle at p, to the bit
// (the scale is an exact power of two in ggml's arithmetic).
TEST(RopeScalingRunnerTest, LinearFactorTwoRotatesAtTwiceThePosition) {
  auto plain = Load(WriteTinyVariant("rope_plain", [](gguf::GgufWriter&) {}));
  auto linear = Load(WriteTinyVariant("rope_linear2", [](gguf::GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "linear");
    w.AddFloat32("llama.rope.scaling.factor", 2.0f);
  }));
  ASSERT_TRUE(plain && linear);
  ASSERT_EQ(linear->config.rope_scaling.type, model::RopeScalingType::kLinear);
  cpu::ThreadPool pool(1);
  const CpuRunnerOptions options{.block_size = 16, .num_kv_blocks = 4};
  CpuModelRunner plain_runner(plain->config, &plain->plan, plain->weights.get(), &pool, options);
  CpuModelRunner linear_runner(linear->config, &linear->plan, linear->weights.get(), &pool, options);
  ASSERT_EQ(linear_runner.rope_table().max_positions(), kTinyContext);
  for (int64_t p = 0; p < kTinyContext / 2; ++p) {
    ASSERT_TRUE(RowsBitEqual(linear_runner.rope_table(), 2 * p, plain_runner.rope_table(), p))
        << p;
  }
  EXPECT_FALSE(RowsBitEqual(linear_runner.rope_table(), 1, plain_runner.rope_table(), 1));
}

// rope_freqs.weight is loaded and divides every pair's angle: factors of 2 give exactly the
// linear-factor-2 model, down to the logits; no factors give different logits.
TEST(RopeScalingRunnerTest, RopeFreqsAreHonoured) {
  auto plain = Load(WriteTinyVariant("freqs_plain", [](gguf::GgufWriter&) {}));
  auto linear = Load(WriteTinyVariant("freqs_linear2", [](gguf::GgufWriter& w) {
    w.AddFloat32("llama.rope.scaling.factor", 2.0f);
  }));
  auto halved = Load(WriteTinyVariant("freqs_twos", [](gguf::GgufWriter& w) {
    AddRopeFreqs(w, std::vector<float>(kTinyRopeDim / 2, 2.0f));
  }));
  ASSERT_TRUE(plain && linear && halved);
  EXPECT_TRUE((*plain->weights)[plain->plan.head.rope_freqs].values.empty());
  ASSERT_EQ((*halved->weights)[halved->plan.head.rope_freqs].values.size(), kTinyRopeDim / 2u);
  const std::vector<float> plain_logits = PromptLogits(*plain);
  const std::vector<float> halved_logits = PromptLogits(*halved);
  EXPECT_EQ(halved_logits, PromptLogits(*linear));
  EXPECT_NE(halved_logits, plain_logits);

  // Uneven factors, as Llama 3.1's: the runner's table is the kernel's table for them.
  std::vector<float> uneven(kTinyRopeDim / 2);
  for (int i = 0; i < kTinyRopeDim / 2; ++i) uneven[i] = 1.0f + 0.5f * static_cast<float>(i);
  auto llama3 = Load(WriteTinyVariant("freqs_uneven", [&](gguf::GgufWriter& w) {
    AddRopeFreqs(w, uneven);
  }));
  ASSERT_TRUE(llama3);
  cpu::ThreadPool pool(1);
  CpuModelRunner runner(llama3->config, &llama3->plan, llama3->weights.get(), &pool,
                        {.block_size = 16, .num_kv_blocks = 4});
  cpu::RopeParams expected_params = RopeParamsForModel(plain->config, {});
  expected_params.freq_factors = uneven;
  const cpu::RopeTable expected(expected_params, kTinyContext);
  for (int64_t p = 0; p < kTinyContext; ++p) {
    ASSERT_TRUE(RowsBitEqual(runner.rope_table(), p, expected, p)) << p;
  }
  EXPECT_NE(PromptLogits(*llama3), plain_logits);
}

TEST(RopeScalingRunnerTest, YarnModelLoadsAndChangesLogits) {
  auto plain = Load(WriteTinyVariant("yarn_plain", [](gguf::GgufWriter&) {}));
  auto yarn = Load(WriteTinyVariant("yarn4", [](gguf::GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "yarn");
    w.AddFloat32("llama.rope.scaling.factor", 4.0f);
    w.AddUint32("llama.rope.scaling.original_context_length", 64);
  }));
  ASSERT_TRUE(plain && yarn);
  EXPECT_EQ(yarn->config.rope_scaling.type, model::RopeScalingType::kYarn);
  EXPECT_EQ(yarn->config.rope_scaling.original_context_length, 64);
  const std::vector<float> logits = PromptLogits(*yarn);
  EXPECT_EQ(logits, PromptLogits(*yarn));  // deterministic
  EXPECT_NE(logits, PromptLogits(*plain));
}

TEST(RopeScalingRunnerTest, BadRopeFreqsAreRejectedByName) {
  auto wrong_size = LoadModel(WriteTinyVariant("freqs_short", [](gguf::GgufWriter& w) {
    AddRopeFreqs(w, std::vector<float>(kTinyRopeDim / 2 - 1, 1.0f));
  }));
  EXPECT_EQ(wrong_size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_size.status().message(), HasSubstr("rope_freqs.weight"));
  std::vector<float> with_zero(kTinyRopeDim / 2, 1.0f);
  with_zero[3] = 0.0f;
  auto zero = LoadModel(WriteTinyVariant("freqs_zero", [&](gguf::GgufWriter& w) {
    AddRopeFreqs(w, with_zero);
  }));
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status().message(), HasSubstr("'rope_freqs.weight' [3]"));
}

}  // namespace
}  // namespace tessera::worker
