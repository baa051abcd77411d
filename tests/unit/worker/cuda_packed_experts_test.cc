// Packed MoE expert stacks on the cuda runner (the fixture's device: the emulated one here): the
// tiny qwen35moe model (expert ffn 64, so every stack is whole 64-element blocks) quantized by
// `tessera quantize` to NVFP4 (per-expert tensor scales, the F32 [experts] `.scale`) and to
// Q8_0. Per format:
//   - every expert stack stays packed on the device (the weight storage counts them, at the
//     format's bytes per weight), and the dense upload of the same file (--dequantize-weights)
//     holds them in bf16;
//   - next-token logits after prompts of 1, 9 and 23 tokens, bf16 packed against the cpu
//     runner's f32 on the same file, within kBf16MaxAbsDiff (both read the same NVFP4 values:
//     the device decodes them exactly and multiplies each expert's products by its scale);
//   - packed and dense uploads agree within the same bound (they differ only in where the bf16
//     rounding of the weights happens: dense rounds each weight, packed keeps them exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "tests/unique_temp_path.h"
#include "tests/unit/worker/cuda_runner_fixture.h"
#include "tools/convert/tiny_hybrid_model.h"
#include "tools/quantize/quantize_model.h"
#include "tools/quantize/quantize_plan.h"

namespace tessera::worker::testing {
namespace {

using device::DataType;

constexpr int kPackedBlockSize = 16;
constexpr int kPackedBlocks = 8;
// Largest |bf16 cuda - f32 cpu| over every logit of the three prompts. Measured 2026-11-26 on
// the emulated device: packed 0.0129, dense 0.0143 at most (NVFP4, 23 tokens; logits up to
// 1.05); without the per-expert scales the packed run is off by more than the logits' spread.
constexpr float kBf16MaxAbsDiff = 0.05f;

struct Format {
  const char* name;
  gguf::GgmlType target;
  int expert_bytes_per_32;  // device bytes per 32 expert weights
};

class CudaPackedExpertsTest : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    if (kOnGpu) {
      const absl::Status device = device::OpenDevice(TestDeviceOptions()).status();
      if (device.code() == absl::StatusCode::kUnavailable) {
        testing_util::SkipOrFailWithoutGpu(std::string(device.message()));
        return;
      }
    }
    convert::TinyHybridOptions options{.arch = convert::TinyHybridArch::kQwen35Moe};
    options.expert_ffn = 64;
    const std::string source = testing_util::UniqueTempPath("packed_experts_f32.gguf");
    path_ = testing_util::UniqueTempPath(std::string("packed_experts_") + GetParam().name + ".gguf");
    ASSERT_TRUE(convert::WriteTinyHybridGguf(options, source).ok());
    auto in = gguf::GgufFile::Open(source);
    ASSERT_TRUE(in.ok()) << in.status();
    auto plan = quantize::PlanQuantization(**in, {.target = GetParam().target});
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(quantize::QuantizeModel(**in, *plan, path_).ok());
    std::filesystem::remove(source);
    auto model = LoadModel(path_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    num_stacks_ = 3 * options.num_layers;
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::unique_ptr<ModelRunner> MakeCpu() {
    return std::make_unique<CpuModelRunner>(
        model_->config, &model_->plan, model_->weights.get(), &pool_,
        CpuRunnerOptions{.block_size = kPackedBlockSize, .num_kv_blocks = kPackedBlocks,
                         .max_num_seqs = 1});
  }
  std::unique_ptr<CudaModelRunner> MakeCuda(bool packed) {
    auto runtime = device::OpenDevice(TestDeviceOptions());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    if (!runtime.ok()) return nullptr;
    auto runner = CudaModelRunner::Create(
        *std::move(runtime), model_->config, model_->plan, *model_->weights,
        {.dtype = DataType::kBf16, .block_size = kPackedBlockSize, .num_kv_blocks = kPackedBlocks,
         .max_num_seqs = 1, .max_num_batched_tokens = 64, .graphs = CudaGraphMode::kOff,
         .keep_weights_packed = packed});
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  // Next-token logits after `prompt` in a fresh slot 0.
  static std::vector<float> Logits(ModelRunner& runner, const std::vector<int32_t>& prompt) {
    std::vector<int32_t> table(kPackedBlocks - 1);
    std::iota(table.begin(), table.end(), 1);
    runner.BeginSequence(0, sampling::SamplingParams{}, prompt, {});
    const SequenceWork work{.tokens = prompt, .start_pos = 0, .block_table = table,
                            .needs_logits = true, .slot = 0};
    StepLogits logits;
    const absl::Status status = runner.Forward({&work, 1}, &logits);
    EXPECT_TRUE(status.ok()) << status;
    runner.EndSequence(0);
    return logits.values;
  }

  kernels::cpu::ThreadPool pool_{2};
  std::string path_;
  std::unique_ptr<LoadedModel> model_;
  int num_stacks_ = 0;
};

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

TEST_P(CudaPackedExpertsTest, StacksStayPackedAndGiveTheCpuRunnersLogits) {
  auto packed = MakeCuda(true);
  auto dense = MakeCuda(false);
  ASSERT_NE(packed, nullptr);
  ASSERT_NE(dense, nullptr);
  // Every expert stack and projection of the format is packed: the stacks are the bulk of it.
  int64_t expert_parameters = 0;
  for (WeightId id = 0; id < model_->plan.weights.size(); ++id) {
    const WeightSpec& spec = model_->plan.weights.spec(id);
    if (spec.role == WeightRole::kExperts) {
      EXPECT_TRUE(packed->device_weights()[id].packed.has_value()) << spec.name;
      EXPECT_FALSE(dense->device_weights()[id].packed.has_value()) << spec.name;
      expert_parameters += spec.elements();
    }
  }
  const std::string format = gguf::GgmlTypeName(GetParam().target);
  WeightStorage storage;
  for (const WeightStorage& s : packed->device_weights().formats) {
    if (s.packed) storage = s;
  }
  EXPECT_EQ(absl::AsciiStrToLower(storage.format), absl::AsciiStrToLower(format));
  EXPECT_GE(storage.parameters, expert_parameters);
  // NVFP4 stacks also hold their per-expert f32 scales on the device.
  const int64_t scale_bytes = GetParam().target == gguf::GgmlType::kNvfp4
                                  ? int64_t{num_stacks_} * model_->config.hybrid->moe->num_experts * 4
                                  : 0;
  EXPECT_EQ((storage.bytes - scale_bytes) * 32, storage.parameters * GetParam().expert_bytes_per_32);

  auto cpu = MakeCpu();
  for (int length : {1, 9, 23}) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < length; ++i) prompt.push_back(3 + (i * 7919 + length) % 250);
    const std::vector<float> reference = Logits(*cpu, prompt);
    const std::vector<float> from_packed = Logits(*packed, prompt);
    const std::vector<float> from_dense = Logits(*dense, prompt);
    const float spread = std::fabs(*std::max_element(reference.begin(), reference.end(),
                                                     [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
    const float packed_diff = MaxAbsDiff(from_packed, reference);
    const float dense_diff = MaxAbsDiff(from_dense, reference);
    std::printf("%s prompt %d: max |logit| %.3g, |packed - cpu| %.3g, |dense - cpu| %.3g, "
                "|packed - dense| %.3g\n",
                GetParam().name, length, spread, packed_diff, dense_diff,
                MaxAbsDiff(from_packed, from_dense));
    EXPECT_LE(packed_diff, kBf16MaxAbsDiff) << "prompt of " << length;
    EXPECT_LE(MaxAbsDiff(from_packed, from_dense), kBf16MaxAbsDiff) << "prompt of " << length;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaPackedExpertsTest,
                         ::testing::Values(Format{"nvfp4", gguf::GgmlType::kNvfp4, 18},
                                           Format{"q8_0", gguf::GgmlType::kQ8_0, 34}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera::worker::testing
