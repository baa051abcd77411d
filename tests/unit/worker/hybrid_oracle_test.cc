// The hybrid Gated-DeltaNet models (qwen35, qwen35moe, qwen3next) on the cpu runner against the
// float64 oracle (tools/oracle/hybrid_reference.py, whose agreement with HF transformers' own
// Qwen3_5 / Qwen3_5Moe / Qwen3Next modules on the same weights is recorded in its docstring:
// within 2.5e-6). tests/data/hybrid/reference.json holds, per model, the next-token logits after
// prompts of 1, 7 and 70 tokens and the 16 greedy tokens after each (with their closest top-1 /
// top-2 margins, so f32 rounding cannot flip a token).
//
// Checked once per kernel ISA (an ISA the CPU lacks skips with the reason):
//   - logits within kMaxAbsDiff of the oracle, greedy tokens equal for 16 steps;
//   - the prompt split into chunks of 5 (the recurrent state carried across chunks; the GDN
//     layers switch between the recurrent and the chunked form) within kMaxAbsDiff, same tokens;
//   - the three prompts batched together give each one's logits bit for bit (batch invariance);
//   - a sequence preempted after 6 tokens and recomputed from prompt + generated tokens gives
//     the same 16 tokens;
//   - Forward leaves the recurrent state as it found it.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/util/check.h"
#include "kernels/cpu/isa.h"
#include "nlohmann/json.hpp"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::worker {
namespace {

constexpr char kDataDir[] = "tests/data/hybrid/";
constexpr int kBlockSize = 16;
// Largest |ours - oracle| over every logit of every prompt, f32 kernels against float64.
// Measured 2026-11-26 on the 2-core AMD EPYC VM: 5.4e-7 .. 4.4e-6 over the three models, three
// prompts and three ISAs (the test prints each). Logits are O(1); the bound leaves ~10x room.
constexpr float kMaxAbsDiff = 5e-5f;

using kernels::cpu::Isa;

// Tests run from the repository root (cmake/Testing.cmake).
nlohmann::json ReadReference() {
  const std::string path = std::string(kDataDir) + "reference.json";
  std::ifstream in(path);
  TESSERA_CHECK(in.good(), "hybrid_oracle_test: cannot open tests/data/hybrid/reference.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return nlohmann::json::parse(buffer.str());
}

struct Prompt {
  std::vector<int32_t> ids;
  std::vector<float> logits;
  std::vector<int32_t> greedy;
};

// Drives one runner slot by slot: prefill in chunks, greedy decode.
class Driver {
 public:
  explicit Driver(CpuModelRunner* runner) : runner_(runner) {
    table_.resize(64);
    std::iota(table_.begin(), table_.end(), 1);
  }

  // Blocks are [1 + 16·slot, ...): each slot its own range.
  std::span<const int32_t> Table(int slot) const {
    return std::span<const int32_t>(table_).subspan(static_cast<size_t>(16 * slot), 16);
  }

  void Begin(int slot, std::span<const int32_t> prompt, std::span<const int32_t> generated = {}) {
    sampling::SamplingParams greedy;
    greedy.temperature = 0.0f;
    runner_->BeginSequence(slot, greedy, prompt, generated);
  }

  // The logits after `tokens` (positions from `start`), fed in chunks of `chunk`.
  std::vector<float> Prefill(int slot, std::span<const int32_t> tokens, int start, int chunk) {
    StepLogits logits;
    for (int pos = 0; pos < static_cast<int>(tokens.size()); pos += chunk) {
      const int n = std::min<int>(chunk, static_cast<int>(tokens.size()) - pos);
      const SequenceWork work{.tokens = tokens.subspan(pos, n),
                              .start_pos = start + pos,
                              .block_table = Table(slot),
                              .needs_logits = pos + n == static_cast<int>(tokens.size()),
                              .slot = slot};
      StepSamples samples;
      if (work.needs_logits) {
        EXPECT_TRUE(runner_->Forward({&work, 1}, &logits).ok());
      }
      const absl::Status status = runner_->Step({&work, 1}, &samples);
      EXPECT_TRUE(status.ok()) << status;
      if (work.needs_logits && !samples.rows.empty()) last_token_ = samples.rows[0].token;
    }
    return std::vector<float>(logits.values.begin(), logits.values.end());
  }

  // Greedy tokens: the one Prefill sampled, then decode steps until `count`.
  std::vector<int32_t> Decode(int slot, int position, int count) {
    std::vector<int32_t> out = {last_token_};
    while (static_cast<int>(out.size()) < count) {
      const int32_t token = out.back();
      const SequenceWork work{.tokens = {&token, 1},
                              .start_pos = position++,
                              .block_table = Table(slot),
                              .needs_logits = true,
                              .slot = slot};
      StepSamples samples;
      const absl::Status status = runner_->Step({&work, 1}, &samples);
      EXPECT_TRUE(status.ok()) << status;
      if (!status.ok()) break;
      out.push_back(samples.rows[0].token);
    }
    return out;
  }

 private:
  CpuModelRunner* runner_;
  std::vector<int32_t> table_;
  int32_t last_token_ = -1;
};

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

class HybridOracleTest : public ::testing::TestWithParam<std::tuple<int, Isa>> {
 protected:
  void SetUp() override {
    const Isa isa = std::get<1>(GetParam());
    if (!kernels::cpu::IsaSupported(isa)) {
      GTEST_SKIP() << "no " << (isa == Isa::kAvx512 ? "AVX-512" : "AVX2") << " on this CPU";
    }
    const nlohmann::json fixture = ReadReference().at("fixtures").at(std::get<0>(GetParam()));
    file_ = fixture.at("file").get<std::string>();  // relative to the repository root
    for (const nlohmann::json& p : fixture.at("prompts")) {
      prompts_.push_back({p.at("ids").get<std::vector<int32_t>>(),
                          p.at("logits").get<std::vector<float>>(),
                          p.at("greedy").get<std::vector<int32_t>>()});
    }
    auto model = LoadModel(file_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    runner_ = std::make_unique<CpuModelRunner>(
        model_->config, &model_->plan, model_->weights.get(), &pool_,
        CpuRunnerOptions{.block_size = kBlockSize, .num_kv_blocks = 1 + 16 * 4,
                         .isa = isa, .max_num_seqs = 4});
  }

  kernels::cpu::ThreadPool pool_{2};
  std::string file_;
  std::vector<Prompt> prompts_;
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<CpuModelRunner> runner_;
};

TEST_P(HybridOracleTest, LogitsAndGreedyTokensMatchTheOracle) {
  Driver driver(runner_.get());
  for (const Prompt& p : prompts_) {
    SCOPED_TRACE(file_ + ", prompt of " + std::to_string(p.ids.size()));
    driver.Begin(0, p.ids);
    const std::vector<float> logits = driver.Prefill(0, p.ids, 0, 512);
    const float diff = MaxAbsDiff(logits, p.logits);
    std::printf("%s prompt %zu: max |logit - oracle| %.3g\n", file_.c_str(), p.ids.size(), diff);
    EXPECT_LE(diff, kMaxAbsDiff);
    EXPECT_EQ(driver.Decode(0, static_cast<int>(p.ids.size()), 16), p.greedy);
    runner_->EndSequence(0);
  }
}

TEST_P(HybridOracleTest, ChunkedPrefillCarriesTheStateAcrossChunks) {
  Driver driver(runner_.get());
  const Prompt& p = prompts_.back();  // 70 tokens: chunks of 5, and one chunk of 70
  driver.Begin(1, p.ids);
  const std::vector<float> chunked = driver.Prefill(1, p.ids, 0, 5);
  EXPECT_LE(MaxAbsDiff(chunked, p.logits), kMaxAbsDiff);
  EXPECT_EQ(driver.Decode(1, static_cast<int>(p.ids.size()), 16), p.greedy);
}

TEST_P(HybridOracleTest, BatchedPromptsMatchEachAloneBitForBit) {
  Driver driver(runner_.get());
  std::vector<std::vector<float>> alone;
  for (const Prompt& p : prompts_) {
    driver.Begin(0, p.ids);
    alone.push_back(driver.Prefill(0, p.ids, 0, 512));
    runner_->EndSequence(0);
  }
  std::vector<SequenceWork> batch;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    const int slot = static_cast<int>(i) + 1;
    driver.Begin(slot, prompts_[i].ids);
    batch.push_back({.tokens = prompts_[i].ids, .start_pos = 0, .block_table = driver.Table(slot),
                     .needs_logits = true, .slot = slot});
  }
  StepLogits logits;
  ASSERT_TRUE(runner_->Forward(batch, &logits).ok());
  for (size_t i = 0; i < prompts_.size(); ++i) {
    const std::span<const float> row = logits.Row(i);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), alone[i].begin(), alone[i].end()))
        << "prompt " << i;
  }
}

TEST_P(HybridOracleTest, PreemptedAndRecomputedGivesTheSameTokens) {
  Driver driver(runner_.get());
  const Prompt& p = prompts_[1];  // 7 tokens
  driver.Begin(2, p.ids);
  driver.Prefill(2, p.ids, 0, 512);
  const std::vector<int32_t> first = driver.Decode(2, static_cast<int>(p.ids.size()), 6);
  runner_->EndSequence(2);  // preempted: its state is dropped
  std::vector<int32_t> known = p.ids;
  known.insert(known.end(), first.begin(), first.end() - 1);  // the last one is not yet fed
  driver.Begin(2, p.ids, std::span<const int32_t>(first).first(first.size() - 1));
  driver.Prefill(2, known, 0, 512);
  std::vector<int32_t> tokens(first.begin(), first.end() - 1);
  const std::vector<int32_t> rest = driver.Decode(2, static_cast<int>(known.size()), 11);
  tokens.insert(tokens.end(), rest.begin(), rest.end());
  EXPECT_EQ(tokens, p.greedy);
}

TEST_P(HybridOracleTest, ForwardLeavesTheRecurrentStateAsItFoundIt) {
  Driver driver(runner_.get());
  const Prompt& p = prompts_[1];
  driver.Begin(3, p.ids);
  const SequenceWork work{.tokens = p.ids, .start_pos = 0, .block_table = driver.Table(3),
                          .needs_logits = true, .slot = 3};
  StepLogits first, second;
  ASSERT_TRUE(runner_->Forward({&work, 1}, &first).ok());
  ASSERT_TRUE(runner_->Forward({&work, 1}, &second).ok());
  EXPECT_EQ(first.values, second.values);
}

TEST_P(HybridOracleTest, ABatchWithoutAStateSlotIsRejected) {
  Driver driver(runner_.get());
  const Prompt& p = prompts_[0];
  const SequenceWork work{.tokens = p.ids, .start_pos = 0, .block_table = driver.Table(0),
                          .needs_logits = true, .slot = -1};
  StepLogits logits;
  const absl::Status status = runner_->Forward({&work, 1}, &logits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("recurrent state per slot"), std::string::npos) << status;
}

std::string Name(const ::testing::TestParamInfo<std::tuple<int, Isa>>& info) {
  static const char* kFiles[] = {"qwen35", "qwen35moe", "qwen3next"};
  return std::string(kFiles[std::get<0>(info.param)]) + "_" +
         std::string(kernels::cpu::IsaName(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Oracle, HybridOracleTest,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::Values(Isa::kScalar, Isa::kAvx2,
                                                              Isa::kAvx512)),
                         Name);

}  // namespace
}  // namespace tessera::worker
