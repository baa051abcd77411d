// Test fixture: the tiny generated llama model (tools/convert), loaded once per test suite, a
// 2-thread kernel pool, and helpers for prompts and protocol sampling parameters.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unique_temp_path.h"
#include "tests/unit/worker/sim_router.h"
#include "tools/convert/tiny_model.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::worker::testing {

// Writes the tiny model with `options` to a fresh temporary file and loads it into *model
// (owned by the caller); returns "" or what went wrong.
inline std::string WriteAndLoadTinyModel(const convert::TinyModelOptions& options,
                                         const std::string& file_name, LoadedModel** model) {
  const std::string path = testing_util::UniqueTempPath(file_name);
  const absl::Status written = convert::WriteTinyLlamaGguf(options, path);
  if (!written.ok()) return "writing the tiny model: " + written.ToString();
  auto loaded = LoadModel(path);
  if (!loaded.ok()) return "loading the tiny model: " + loaded.status().ToString();
  *model = loaded->release();
  return "";
}

class TinyModelTest : public ::testing::Test {
 protected:
  // Setup errors are recorded, not asserted: every test fails on them in SetUp (tests/README.md).
  static void SetUpTestSuite() {
    setup_error_ = WriteAndLoadTinyModel({.num_layers = 2, .seed = 5}, "worker_tiny_model.gguf",
                                         &model_);
    if (setup_error_.empty()) pool_ = new kernels::cpu::ThreadPool(2);
  }
  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }
  static void TearDownTestSuite() {
    delete pool_;
    delete model_;
    pool_ = nullptr;
    model_ = nullptr;
  }

  static std::unique_ptr<CpuModelRunner> MakeRunner(int block_size, int64_t num_blocks) {
    return std::make_unique<CpuModelRunner>(
        model_->config, &model_->plan, model_->weights.get(), pool_,
        CpuRunnerOptions{.block_size = block_size, .num_kv_blocks = num_blocks});
  }

  static const model::ModelConfig& config() { return model_->config; }

  // Deterministic pseudo-random prompt of ordinary tokens (ids 3.. skip the special ones).
  static std::vector<int32_t> Prompt(int length, int seed) {
    std::vector<int32_t> ids(length);
    for (int i = 0; i < length; ++i) {
      ids[i] = 3 + (seed * 7919 + i * 104729) % (model_->config.vocab_size - 3);
    }
    return ids;
  }

  static v1::SamplingParams Sampling(float temperature, uint64_t seed) {
    v1::SamplingParams p = DefaultSampling();
    p.set_temperature(temperature);
    p.set_seed(seed);
    return p;
  }

  static inline std::string setup_error_;
  static inline LoadedModel* model_ = nullptr;
  static inline kernels::cpu::ThreadPool* pool_ = nullptr;
};

}  // namespace tessera::worker::testing
