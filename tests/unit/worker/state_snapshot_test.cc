// Recurrent-state snapshots for prefix caching on hybrid models, on the worker's side: the cpu
// runner's pool (save, restore) and the step protocol (SequenceStep.save_snapshot,
// NewSequence.restore_snapshot) through a real StepExecutor on tests/data/hybrid/tiny-qwen35.gguf.
// A sequence admitted with a cached block and the snapshot taken at its end computes exactly what
// the sequence that made them computed: same greedy token, same logprob bits. Without the
// snapshot (cached K/V but a zero state) it does not. Bad snapshot ids are refused, naming them.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/model/hybrid_layout.h"
#include "tests/unit/worker/sim_router.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"
#include "worker/step_executor.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = "tests/data/hybrid/tiny-qwen35.gguf";
constexpr int kBlockSize = 16;

std::vector<int32_t> Prompt(int length) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < length; ++i) tokens.push_back(3 + (i * 7919) % 250);
  return tokens;
}

class StateSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = LoadModel(kModel);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    runner_ = std::make_unique<CpuModelRunner>(
        model_->config, &model_->plan, model_->weights.get(), &pool_,
        CpuRunnerOptions{.block_size = kBlockSize, .num_kv_blocks = 16, .max_num_seqs = 4,
                         .state_snapshot_bytes = 4 * runner_state_bytes()});
    executor_ = std::make_unique<StepExecutor>(runner_.get(),
                                               StepExecutorOptions{.max_num_seqs = 4});
  }

  int64_t runner_state_bytes() const {
    return model::PerSequenceStateBytes(*model_->config.hybrid).total;
  }

  v1::StepPlan Plan() {
    v1::StepPlan plan;
    plan.set_step(++step_);
    return plan;
  }
  static v1::NewSequence* AddNew(v1::StepPlan& plan, int slot, const std::vector<int32_t>& tokens,
                                 int num_cached = 0, int restore = 0) {
    v1::NewSequence* seq = plan.add_new_sequences();
    seq->set_slot(slot);
    *seq->mutable_sampling() = testing::DefaultSampling();
    for (int32_t t : tokens) seq->add_tokens(t);
    seq->set_num_prompt_tokens(static_cast<int32_t>(tokens.size()));
    seq->set_num_cached_tokens(num_cached);
    seq->set_restore_snapshot(restore);
    return seq;
  }
  static v1::SequenceStep* AddStep(v1::StepPlan& plan, int slot, int num_tokens,
                                   const std::vector<int32_t>& blocks, int save = 0) {
    v1::SequenceStep* step = plan.add_sequences();
    step->set_slot(slot);
    step->set_num_tokens(num_tokens);
    for (int32_t b : blocks) step->add_new_blocks(b);
    step->set_save_snapshot(save);
    return step;
  }
  absl::StatusOr<v1::StepResult> Run(const v1::StepPlan& plan) {
    v1::StepResult result;
    const absl::Status status = executor_->Execute(plan, std::chrono::steady_clock::now(), &result);
    if (!status.ok()) return status;
    return result;
  }

  // Slot 0 computes `prompt` in two chunks, [0, 16) saving snapshot 1 at its end, then the rest:
  // the token it samples.
  v1::SampledToken ColdRunSavingSnapshot(const std::vector<int32_t>& prompt) {
    v1::StepPlan one = Plan();
    AddNew(one, 0, prompt);
    AddStep(one, 0, kBlockSize, {1}, /*save=*/1);
    EXPECT_TRUE(Run(one).ok());
    v1::StepPlan two = Plan();
    AddStep(two, 0, static_cast<int>(prompt.size()) - kBlockSize, {2, 3});
    const absl::StatusOr<v1::StepResult> result = Run(two);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->sampled(0) : v1::SampledToken();
  }

  kernels::cpu::ThreadPool pool_{2};
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<CpuModelRunner> runner_;
  std::unique_ptr<StepExecutor> executor_;
  uint64_t step_ = 0;
};

TEST_F(StateSnapshotTest, TheRunnerHoldsTheSnapshotsItsBytesAllow) {
  EXPECT_EQ(runner_->state_snapshot_slots(), 4);
  EXPECT_GT(runner_->layer_info().state_bytes_per_sequence, 0);
}

TEST_F(StateSnapshotTest, AHitRestoringTheSnapshotComputesWhatTheColdRunDid) {
  const std::vector<int32_t> prompt = Prompt(40);
  const v1::SampledToken cold = ColdRunSavingSnapshot(prompt);
  // Slot 1: the same prompt, its first block served from slot 0's block 1 and the state from
  // snapshot 1, the last 24 tokens computed.
  v1::StepPlan hit = Plan();
  AddNew(hit, 1, prompt, /*num_cached=*/kBlockSize, /*restore=*/1);
  AddStep(hit, 1, static_cast<int>(prompt.size()) - kBlockSize, {1, 4, 5});
  const absl::StatusOr<v1::StepResult> result = Run(hit);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->sampled_size(), 1);
  EXPECT_EQ(result->sampled(0).token_id(), cold.token_id());
  EXPECT_EQ(result->sampled(0).logprob(), cold.logprob());  // the same bits
}

TEST_F(StateSnapshotTest, CachedBlocksWithoutTheSnapshotComputeSomethingElse) {
  const std::vector<int32_t> prompt = Prompt(40);
  const v1::SampledToken cold = ColdRunSavingSnapshot(prompt);
  v1::StepPlan no_state = Plan();
  AddNew(no_state, 1, prompt, /*num_cached=*/kBlockSize, /*restore=*/0);
  AddStep(no_state, 1, static_cast<int>(prompt.size()) - kBlockSize, {1, 4, 5});
  const absl::StatusOr<v1::StepResult> result = Run(no_state);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NE(result->sampled(0).logprob(), cold.logprob());
}

TEST_F(StateSnapshotTest, BadSnapshotIdsAreRefusedNamingTheField) {
  const std::vector<int32_t> prompt = Prompt(20);
  {
    v1::StepPlan plan = Plan();
    AddNew(plan, 0, prompt, 0, /*restore=*/1);
    AddStep(plan, 0, 20, {1, 2});
    EXPECT_THAT(Run(plan).status().message(), HasSubstr("new_sequences[0].restore_snapshot = 1"));
    --step_;
  }
  {
    v1::StepPlan plan = Plan();
    AddNew(plan, 0, prompt);
    AddStep(plan, 0, 20, {1, 2}, /*save=*/5);
    EXPECT_THAT(Run(plan).status().message(), HasSubstr("sequences[0].save_snapshot = 5"));
    --step_;
  }
  {
    v1::StepPlan plan = Plan();
    AddNew(plan, 0, prompt);
    AddNew(plan, 1, prompt);
    AddStep(plan, 0, 16, {1}, /*save=*/2);
    AddStep(plan, 1, 16, {2}, /*save=*/2);
    EXPECT_THAT(Run(plan).status().message(), HasSubstr("named by two sequences"));
  }
}

}  // namespace
}  // namespace tessera::worker
