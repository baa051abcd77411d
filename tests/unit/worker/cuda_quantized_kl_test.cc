// The KL gate of issue 24 on the cuda runner (DESIGN.md §6), on the emulated device: the default
// model quantized to NVFP4 by `tessera quantize`, served in bf16 with its projections kept
// packed, against the shipped model on the cpu runner (f32), teacher-forced over the 114 tokens
// of tests/testing/teacher_forced_kl.h's real text: mean KL and top-1 agreement within the
// bounds the cpu gate asserts for NVFP4 (quantized_model_kl_test), and the device run close to
// the cpu runner's run of the same NVFP4 file (so what is measured is the format, not the device
// path).
//
// Every position's logits in two runner calls: one Forward over the whole text writes every
// position's K/V, then one Forward of 114 one-token rows, row i the token at position i reading
// that K/V (each rewrites its own position with the same values), each in its own slot as the
// runner requires.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/device/device_runtime.h"
#include "tests/testing/teacher_forced_kl.h"
#include "tests/unique_temp_path.h"
#include "tools/quantize/quantize_model.h"
#include "tools/quantize/quantize_plan.h"
#include "worker/cuda/cuda_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::worker {
namespace {

constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr int kBlockSize = 16;

// Every prefix's next-token logits on an emulated-device runner (bf16, weights packed).
std::vector<std::vector<float>> DeviceTeacherForcedLogits(const LoadedModel& model,
                                                          const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size());
  const int blocks = n / kBlockSize + 2;
  auto runtime = device::OpenDevice({.kind = device::DeviceKind::kEmulated,
                                     .emulated_memory_bytes = uint64_t{1} << 30});
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  if (!runtime.ok()) return {};
  auto runner = CudaModelRunner::Create(
      *std::move(runtime), model.config, model.plan, *model.weights,
      {.dtype = device::DataType::kBf16, .block_size = kBlockSize, .num_kv_blocks = blocks,
       .max_num_seqs = n, .max_num_batched_tokens = n, .graphs = CudaGraphMode::kOff},
      model.file.get());
  EXPECT_TRUE(runner.ok()) << runner.status();
  if (!runner.ok()) return {};
  std::vector<int32_t> table(blocks - 1);
  std::iota(table.begin(), table.end(), 1);
  const SequenceWork whole{.tokens = tokens, .start_pos = 0, .block_table = table,
                           .needs_logits = true, .slot = 0};
  StepLogits logits;
  const absl::Status prefill = (*runner)->Forward({&whole, 1}, &logits);
  EXPECT_TRUE(prefill.ok()) << prefill;
  std::vector<SequenceWork> rows;
  for (int i = 0; i < n; ++i) {
    rows.push_back({.tokens = std::span(tokens).subspan(i, 1), .start_pos = i,
                    .block_table = table, .needs_logits = true, .slot = i});
  }
  const absl::Status status = (*runner)->Forward(rows, &logits);
  EXPECT_TRUE(status.ok()) << status;
  std::vector<std::vector<float>> out;
  if (!status.ok()) return out;
  for (int i = 0; i < n; ++i) out.emplace_back(logits.Row(i).begin(), logits.Row(i).end());
  return out;
}

TEST(CudaQuantizedKlTest, Nvfp4DefaultModelOnTheDeviceStaysWithinTheKlBound) {
  std::unique_ptr<LoadedModel> exact;
  std::vector<int32_t> tokens;
  const std::string error = testing_util::LoadKlFixture(kDefaultModel, &exact, &tokens);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_GE(tokens.size(), 100u);
  const std::string path = testing_util::UniqueTempPath("cuda_kl_nvfp4.gguf");
  auto plan = quantize::PlanQuantization(*exact->file, {.target = gguf::GgmlType::kNvfp4});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(quantize::QuantizeModel(*exact->file, *plan, path).ok());
  auto quantized = LoadModel(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(quantized.ok()) << quantized.status();

  const auto exact_logits = testing_util::TeacherForcedLogits(*exact, {}, tokens);
  const auto cpu_nvfp4 = testing_util::TeacherForcedLogits(**quantized, {}, tokens);
  const auto device_nvfp4 = DeviceTeacherForcedLogits(**quantized, tokens);
  ASSERT_EQ(device_nvfp4.size(), tokens.size());
  const testing_util::KlSummary gate = testing_util::CompareLogits(exact_logits, device_nvfp4);
  const testing_util::KlSummary path_only = testing_util::CompareLogits(cpu_nvfp4, device_nvfp4);
  std::printf("nvfp4 on the emulated device (bf16, packed) vs the shipped model on the cpu over "
              "%zu positions: mean KL %.3g nats, max KL %.3g, top-1 agreement %.3f; vs the same "
              "file on the cpu: mean KL %.3g, max %.3g, top-1 agreement %.3f\n",
              gate.positions, gate.mean_kl, gate.max_kl, gate.top1_agreement, path_only.mean_kl,
              path_only.max_kl, path_only.top1_agreement);
  // The cpu gate's NVFP4 bounds (quantized_model_kl_test.cc).
  EXPECT_GT(gate.mean_kl, 0.02);
  EXPECT_LE(gate.mean_kl, 0.35);
  EXPECT_GE(gate.top1_agreement, 0.70);
  // The device path itself: bf16 activations around the same NVFP4 weights. Measured 2026-11-26
  // (2-core AMD EPYC VM, emulated device): mean KL 0.00117, max 0.036, top-1 agreement 1.000;
  // the gate above: mean KL 0.215, max 1.26, top-1 0.789 (the cpu's NVFP4 run: 0.217 / 0.789).
  EXPECT_LE(path_only.mean_kl, 0.01);
  EXPECT_GE(path_only.top1_agreement, 0.95);
}

}  // namespace
}  // namespace tessera::worker
