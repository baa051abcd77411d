// Test fixture for the cuda runner: a tiny generated llama model with head_dim 64 (the smallest
// head size the attention kernels are built for), written and loaded once per suite, runners of
// both backends over it, and a driver that serves SimRouter request mixes through a StepExecutor.
//
// The device is a compile definition: TESSERA_TEST_CUDA_DEVICE=0 the emulated device (label
// cuda-emulated), 1 the real GPU (the gpu_ copies in tests/gpu, label gpu). On the GPU each test
// skips where no GPU is usable and none is expected, and fails where one is
// (tests/testing/gpu_expectation.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/thread_pool.h"
#include "kernels/device/device_runtime.h"
#include "tests/testing/gpu_expectation.h"
#include "tests/unique_temp_path.h"
#include "tests/unit/worker/sim_router.h"
#include "tests/unit/worker/tiny_model_fixture.h"
#include "tools/convert/tiny_model.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/cuda/cuda_model_runner.h"
#include "worker/loaded_model.h"
#include "worker/step_executor.h"

namespace tessera::worker::testing {

#ifndef TESSERA_TEST_CUDA_DEVICE
#error "TESSERA_TEST_CUDA_DEVICE (0: emulated, 1: cuda) must be defined"
#endif

inline constexpr int kBlockSize = 4;
inline constexpr int kNumBlocks = 96;
inline constexpr bool kOnGpu = TESSERA_TEST_CUDA_DEVICE != 0;

// The fixture's device; the emulated one with 256 MiB (weights, activations and a 96-block pool
// of the tiny model take a few MiB).
inline device::DeviceOptions TestDeviceOptions() {
  return {.kind = kOnGpu ? device::DeviceKind::kCuda : device::DeviceKind::kEmulated,
          .emulated_memory_bytes = uint64_t{256} << 20};
}

class CudaRunnerTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    setup_error_ = WriteAndLoadTinyModel({.num_layers = 2, .hidden = 128, .num_heads = 2,
                                          .num_kv_heads = 1, .ffn = 256, .context_length = 128,
                                          .seed = 11},
                                         "cuda_runner_tiny.gguf", &model_);
    if (setup_error_.empty()) pool_ = new kernels::cpu::ThreadPool(2);
    // Whether the GPU opens at all, asked once: UNAVAILABLE (no GPU, no driver, no CUDA in this
    // build) is what a test may skip for.
    if (kOnGpu) device_status_ = device::OpenDevice(TestDeviceOptions()).status();
  }
  static void TearDownTestSuite() {
    delete pool_;
    delete model_;
    pool_ = nullptr;
    model_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    if (device_status_.code() == absl::StatusCode::kUnavailable) {
      testing_util::SkipOrFailWithoutGpu(std::string(device_status_.message()));
      return;
    }
    ASSERT_TRUE(device_status_.ok()) << device_status_;
  }

  static const model::ModelConfig& config() { return model_->config; }

  static std::unique_ptr<CpuModelRunner> MakeCpuRunner(int max_num_seqs = 8) {
    return std::make_unique<CpuModelRunner>(
        model_->config, &model_->plan, model_->weights.get(), pool_,
        CpuRunnerOptions{.block_size = kBlockSize, .num_kv_blocks = kNumBlocks,
                         .max_num_seqs = max_num_seqs});
  }

  // A runner on the fixture's device; the options' block size and pool are the fixture's.
  static std::unique_ptr<CudaModelRunner> MakeCudaRunner(CudaRunnerOptions options) {
    options.block_size = kBlockSize;
    options.num_kv_blocks = kNumBlocks;
    auto runtime = device::OpenDevice(TestDeviceOptions());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    auto runner =
        CudaModelRunner::Create(*std::move(runtime), model_->config, model_->plan,
                                *model_->weights, options);
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  // Deterministic prompt of ordinary token ids.
  static std::vector<int32_t> Prompt(int length, int seed) {
    std::vector<int32_t> ids(length);
    for (int i = 0; i < length; ++i) {
      ids[i] = 3 + (seed * 7919 + i * 104729) % (model_->config.vocab_size - 3);
    }
    return ids;
  }

  // Serves the requests through a StepExecutor on `runner` until all finish; returns them with
  // their results.
  static std::vector<SimRequest> Serve(ModelRunner& runner, const std::vector<SimRequest>& reqs,
                                       int max_num_seqs,
                                       const GrammarVocabulary* grammar_vocabulary = nullptr) {
    StepExecutor executor(&runner, {.max_num_seqs = max_num_seqs,
                                    .grammar_vocabulary = grammar_vocabulary});
    SimRouter router(kBlockSize, kNumBlocks, max_num_seqs);
    for (const SimRequest& r : reqs) router.Add(r);
    v1::StepResult result;
    for (int step = 0; step < 1000 && !router.Done(); ++step) {
      const v1::StepPlan plan = router.NextPlan();
      const absl::Status status = executor.Execute(plan, StepExecutor::Clock::now(), &result);
      EXPECT_TRUE(status.ok()) << status;
      if (!status.ok()) break;
      EXPECT_TRUE(router.OnResult(result));
    }
    EXPECT_TRUE(router.Done());
    std::vector<SimRequest> out;
    for (size_t i = 0; i < reqs.size(); ++i) out.push_back(router.request(static_cast<int>(i)));
    return out;
  }

  static inline std::string setup_error_;
  static inline absl::Status device_status_;
  static inline LoadedModel* model_ = nullptr;
  static inline kernels::cpu::ThreadPool* pool_ = nullptr;
};

// A batch entry for direct runner calls: `tokens` at `start` with the given table.
inline SequenceWork Work(const std::vector<int32_t>& tokens, int start,
                         const std::vector<int32_t>& table, bool needs_logits, int slot) {
  return {.tokens = tokens, .start_pos = start, .block_table = table,
          .needs_logits = needs_logits, .slot = slot};
}

}  // namespace tessera::worker::testing
