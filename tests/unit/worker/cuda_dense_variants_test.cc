// The llama definition's Qwen variants on the cuda runner (emulated device) against the cpu
// runner: Qwen2 (q/k/v biases: the [q|k|v] concatenation is made, the biases added inside the
// fused RoPE + KV write) and Qwen3 (q/k norms: the concatenation is not made, the parts run with
// their norms). Logits at every position of a prompt: f32 within the f32 tolerance, bf16 (packed
// weights, concatenated where made) within the bf16 tolerance and the KL bound of the llama test.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "tests/testing/greedy_comparison.h"
#include "tests/unit/worker/position_logits.h"
#include "tests/unit/worker/tiny_model_fixture.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/cuda/cuda_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::worker::testing {
namespace {

using convert::TinyDenseArch;
using device::DataType;

constexpr int kBlocks = 16;

std::unique_ptr<CudaModelRunner> MakeRunner(const LoadedModel& model, DataType dtype) {
  auto runtime = device::OpenDevice({.kind = device::DeviceKind::kEmulated,
                                     .emulated_memory_bytes = uint64_t{128} << 20});
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  if (!runtime.ok()) return nullptr;
  auto runner = CudaModelRunner::Create(*std::move(runtime), model.config, model.plan,
                                        *model.weights,
                                        {.dtype = dtype, .block_size = 16,
                                         .num_kv_blocks = kBlocks, .max_num_seqs = 1,
                                         .graphs = CudaGraphMode::kOff},
                                        model.file.get());
  EXPECT_TRUE(runner.ok()) << runner.status();
  return runner.ok() ? *std::move(runner) : nullptr;
}

// Whether layer `layer`'s [q|k|v] concatenation is on the device, and its q part.
std::pair<bool, bool> QkvOnDevice(const CudaModelRunner& runner, const LoadedModel& model,
                                  int layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  const WeightDeclaration& w = model.plan.weights;
  return {runner.device_weights()[w.Find(p + "[attn_q | attn_k | attn_v]")].present(),
          runner.device_weights()[w.Find(p + "attn_q.weight")].present()};
}

void CheckVariant(TinyDenseArch arch, const char* name, bool expect_concatenated) {
  LoadedModel* raw = nullptr;
  const std::string error = WriteAndLoadTinyModel(
      {.arch = arch, .num_layers = 2, .hidden = 128, .num_heads = 2, .num_kv_heads = 1,
       .ffn = 256, .context_length = 128, .seed = 17},
      std::string("cuda_") + name + ".gguf", &raw);
  ASSERT_EQ(error, "");
  const std::unique_ptr<LoadedModel> model(raw);
  kernels::cpu::ThreadPool pool(2);
  CpuModelRunner cpu(model->config, &model->plan, model->weights.get(), &pool,
                     {.block_size = 16, .num_kv_blocks = kBlocks, .max_num_seqs = 1});
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(3 + (i * 7919) % (model->config.vocab_size - 3));
  const auto reference = PositionLogits(cpu, prompt, kBlocks);

  auto f32 = MakeRunner(*model, DataType::kF32);
  auto bf16 = MakeRunner(*model, DataType::kBf16);
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(bf16, nullptr);
  for (int layer = 0; layer < 2; ++layer) {
    const auto [fused, part] = QkvOnDevice(*bf16, *model, layer);
    EXPECT_EQ(fused, expect_concatenated) << name << " layer " << layer;
    EXPECT_EQ(part, !expect_concatenated) << name << " layer " << layer;
  }
  const LogitDiffs f32_diffs = MaxDiffs(reference, PositionLogits(*f32, prompt, kBlocks));
  const auto bf16_logits = PositionLogits(*bf16, prompt, kBlocks);
  const LogitDiffs bf16_diffs = MaxDiffs(reference, bf16_logits);
  const double kl = MeanKl(reference, bf16_logits);
  std::printf("%s: f32 max |dlogprob| %.3g; bf16 max |dlogprob| %.3g, mean KL %.3g nats\n", name,
              f32_diffs.logprob, bf16_diffs.logprob, kl);
  EXPECT_LT(f32_diffs.logprob, testing_util::kCudaF32Tolerance.logprob) << name;
  EXPECT_LT(bf16_diffs.logprob, testing_util::kCudaBf16Tolerance.logprob) << name;
  EXPECT_LT(kl, 2e-3) << name;
}

TEST(CudaDenseVariantsTest, Qwen2BiasesRideTheConcatenatedQkvPath) {
  CheckVariant(TinyDenseArch::kQwen2, "qwen2", /*expect_concatenated=*/true);
}

TEST(CudaDenseVariantsTest, Qwen3QkNormsKeepTheSeparateProjections) {
  CheckVariant(TinyDenseArch::kQwen3, "qwen3", /*expect_concatenated=*/false);
}

}  // namespace
}  // namespace tessera::worker::testing
