// The step executor on the tiny generated model: plans driven like the router does (chunked
// prefill, decodes with no token ids, staggered admissions, drops, preemption + re-admission,
// prefix-cache hits) give exactly the tokens and bit-identical logprobs of GenerateOffline.
// Validation: step_executor_validation_test.cc.
#include "worker/step_executor.h"

#include <cstring>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/worker/sim_router.h"
#include "tests/unit/worker/tiny_model_fixture.h"
#include "worker/offline_generation.h"

namespace tessera::worker {
namespace {

using testing::SimRequest;
using testing::SimRouter;

class StepExecutorTest : public testing::TinyModelTest {
 protected:
  // Runs every request of `router` to completion through `executor`, one plan at a time.
  void Drive(StepExecutor& executor, SimRouter& router, int max_steps = 500) {
    v1::StepResult result;
    for (int i = 0; i < max_steps && !router.Done(); ++i) {
      const v1::StepPlan plan = router.NextPlan();
      absl::Status status = executor.Execute(plan, StepExecutor::Clock::now(), &result);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_TRUE(router.OnResult(result)) << result.DebugString();
      if (executor.last_step_stats().info.device_seconds < 0) {  // the cpu runner
        EXPECT_EQ(result.timings().graph_replayed(), false);
        EXPECT_GE(result.timings().total_seconds(), result.timings().device_seconds());
      } else {
        EXPECT_EQ(result.timings().graph_replayed(),
                  executor.last_step_stats().info.graph_replayed);
      }
    }
    ASSERT_TRUE(router.Done());
  }

  // The request served alone by GenerateOffline (its own runner and blocks).
  void ExpectSameAsAlone(const SimRequest& request, const std::string& what) {
    GenerationRequest alone{.prompt = request.prompt,
                            .max_tokens = request.max_tokens,
                            .sampling = SamplingParamsFromProto(request.sampling),
                            .stop_token_ids = {},
                            .prefill_chunk = 7};
    auto runner = MakeRunner(4, 64);
    auto expected = GenerateOffline(*runner, alone, nullptr);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(request.tokens, expected->tokens) << what;
    ASSERT_EQ(request.logprobs.size(), expected->logprobs.size()) << what;
    EXPECT_EQ(std::memcmp(request.logprobs.data(), expected->logprobs.data(),
                          expected->logprobs.size() * sizeof(float)),
              0)
        << what << ": logprobs differ";
  }
};

TEST_F(StepExecutorTest, ChunkedPrefillThenDecodesMatchesGenerateOffline) {
  for (float temperature : {0.0f, 0.9f}) {
    auto runner = MakeRunner(4, 128);
    StepExecutor executor(runner.get(), {.max_num_seqs = 4});
    SimRouter router(4, 128, 4);
    SimRequest request{.prompt = Prompt(23, 1), .max_tokens = 12, .chunk = 5};
    request.sampling = Sampling(temperature, /*seed=*/7);
    router.Add(request);
    Drive(executor, router);
    ExpectSameAsAlone(router.request(0), absl::StrCat("temperature ", temperature));
    EXPECT_EQ(executor.slots().num_active(), 0);
  }
}

TEST_F(StepExecutorTest, StaggeredBatchEqualsEachAlone) {
  auto runner = MakeRunner(4, 128);
  StepExecutor executor(runner.get(), {.max_num_seqs = 8});
  SimRouter router(4, 128, 8);
  const std::vector<int> lengths = {3, 17, 9, 30, 1};
  const std::vector<int> arrivals = {1, 2, 2, 5, 9};
  const std::vector<int> max_tokens = {10, 4, 12, 6, 9};
  for (size_t i = 0; i < lengths.size(); ++i) {
    SimRequest request{.prompt = Prompt(lengths[i], static_cast<int>(i) + 2),
                       .max_tokens = max_tokens[i],
                       .arrival_step = arrivals[i],
                       .chunk = 4 + static_cast<int>(i)};
    // Mixed sampling: greedy, seeded stochastic, penalties.
    request.sampling = Sampling(i % 2 == 0 ? 0.0f : 0.8f, /*seed=*/100 + i);
    if (i == 2) request.sampling.set_frequency_penalty(0.7f);
    if (i == 3) request.sampling.set_top_p(0.9f);
    router.Add(request);
  }
  Drive(executor, router);
  for (size_t i = 0; i < lengths.size(); ++i) {
    ExpectSameAsAlone(router.request(static_cast<int>(i)), absl::StrCat("request ", i));
  }
}

TEST_F(StepExecutorTest, DroppedSlotIsReusedByTheNextRequest) {
  auto runner = MakeRunner(4, 128);
  StepExecutor executor(runner.get(), {.max_num_seqs = 1});  // one slot: strictly sequential
  SimRouter router(4, 128, 1);
  for (int i = 0; i < 3; ++i) {
    SimRequest request{.prompt = Prompt(6 + 5 * i, 10 + i), .max_tokens = 5, .chunk = 4};
    request.sampling = Sampling(i == 1 ? 1.0f : 0.0f, /*seed=*/3);
    router.Add(request);
  }
  Drive(executor, router);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(router.slot_of(i), 0);
    ExpectSameAsAlone(router.request(i), absl::StrCat("request ", i));
  }
}

TEST_F(StepExecutorTest, PreemptedAndReadmittedSeededRequestContinuesIdentically) {
  // keep_cached_blocks 0: recompute everything; 2: the first 8 tokens come back as a
  // prefix-cache hit (their K/V never left the pool). With 2 slots the re-admission reuses the
  // dropped slot in the same plan (the runner's EndSequence before its BeginSequence); with 4 it
  // goes to another slot.
  for (int num_slots : {2, 4}) {
    for (int keep_cached_blocks : {0, 2}) {
      const std::string what = absl::StrCat(num_slots, " slots, keep ", keep_cached_blocks,
                                            " blocks");
      auto runner = MakeRunner(4, 128);
      StepExecutor executor(runner.get(), {.max_num_seqs = num_slots});
      SimRouter router(4, 128, num_slots);
      SimRequest request{.prompt = Prompt(13, 4), .max_tokens = 14, .chunk = 6};
      request.sampling = Sampling(1.1f, /*seed=*/99);
      request.sampling.set_presence_penalty(0.5f);
      request.sampling.set_frequency_penalty(0.8f);
      request.sampling.set_repetition_penalty(1.2f);
      request.sampling.set_top_k(40);
      const int id = router.Add(request);
      router.Add({.prompt = Prompt(9, 5), .max_tokens = 12, .chunk = 3});  // company
      v1::StepResult result;
      while (router.request(id).tokens.size() < 6) {
        const v1::StepPlan plan = router.NextPlan();
        ASSERT_TRUE(executor.Execute(plan, StepExecutor::Clock::now(), &result).ok());
        ASSERT_TRUE(router.OnResult(result));
      }
      ASSERT_EQ(router.slot_of(id), 0);
      router.Preempt(id, keep_cached_blocks);
      Drive(executor, router);
      EXPECT_EQ(router.slot_of(id), num_slots == 2 ? 0 : 2) << what;
      ExpectSameAsAlone(router.request(id), what);
      ExpectSameAsAlone(router.request(1), absl::StrCat(what, ": the other request"));
    }
  }
}

TEST_F(StepExecutorTest, PrefixCacheHitSharesBlocksWithALiveSequence) {
  auto runner = MakeRunner(4, 128);
  StepExecutor executor(runner.get(), {.max_num_seqs = 4});
  SimRouter router(4, 128, 4);
  const std::vector<int32_t> shared = Prompt(12, 6);
  SimRequest first{.prompt = shared, .max_tokens = 10};
  first.prompt.push_back(7);
  const int a = router.Add(first);
  v1::StepResult result;
  for (int i = 0; i < 2; ++i) {  // prefill + one decode of the first request
    ASSERT_TRUE(executor.Execute(router.NextPlan(), StepExecutor::Clock::now(), &result).ok());
    ASSERT_TRUE(router.OnResult(result));
  }
  // The second request shares the first request's first 3 full blocks (12 tokens).
  SimRequest second{.prompt = shared, .max_tokens = 8, .arrival_step = 3};
  second.prompt.insert(second.prompt.end(), {40, 41, 42});
  const std::vector<int32_t>& blocks = router.blocks_of(a);
  second.cached_blocks.assign(blocks.begin(), blocks.begin() + 3);
  const int b = router.Add(second);
  Drive(executor, router);
  ExpectSameAsAlone(router.request(a), "owner");
  ExpectSameAsAlone(router.request(b), "prefix hit");
}

TEST_F(StepExecutorTest, LogprobsAndTopLogprobsWhenAsked) {
  auto runner = MakeRunner(4, 128);
  StepExecutor executor(runner.get(), {.max_num_seqs = 2});
  SimRouter router(4, 128, 2);
  SimRequest with{.prompt = Prompt(5, 8), .max_tokens = 3};
  with.sampling.set_top_logprobs(5);
  SimRequest without{.prompt = Prompt(5, 8), .max_tokens = 3};
  without.sampling.set_logprobs(false);
  router.Add(with);
  router.Add(without);
  Drive(executor, router);
  for (const v1::SampledToken& t : router.request(0).sampled) {
    ASSERT_EQ(t.top_logprobs_size(), 5);
    EXPECT_EQ(t.top_logprobs(0).token_id(), t.token_id());  // greedy picks the best
    EXPECT_EQ(t.top_logprobs(0).logprob(), t.logprob());
    EXPECT_LT(t.logprob(), 0.0f);
  }
  for (const v1::SampledToken& t : router.request(1).sampled) {
    EXPECT_EQ(t.top_logprobs_size(), 0);
    EXPECT_EQ(t.logprob(), 0.0f);  // not asked: left unset
  }
  EXPECT_EQ(router.request(0).tokens, router.request(1).tokens);
}

TEST_F(StepExecutorTest, ResultReportsActiveSlotsAndTimings) {
  auto runner = MakeRunner(4, 128);
  StepExecutor executor(runner.get(), {.max_num_seqs = 4});
  SimRouter router(4, 128, 4);
  router.Add({.prompt = Prompt(8, 1), .max_tokens = 2});
  router.Add({.prompt = Prompt(8, 2), .max_tokens = 2});
  v1::StepResult result;
  const auto received = StepExecutor::Clock::now();
  ASSERT_TRUE(executor.Execute(router.NextPlan(), received, &result).ok());
  EXPECT_EQ(result.step(), 1u);
  EXPECT_EQ(result.active_slots(), 2);
  EXPECT_EQ(result.sampled_size(), 2);
  const v1::StepTimings& t = result.timings();
  EXPECT_GT(t.device_seconds(), 0.0);
  EXPECT_GE(t.host_seconds(), 0.0);
  EXPECT_GE(t.sample_seconds(), 0.0);
  EXPECT_GE(t.total_seconds(), t.host_seconds() + t.device_seconds());
  // The cpu runner: no device time, so device_seconds is the forward pass's wall time.
  EXPECT_EQ(executor.last_step_stats().info.device_seconds, -1);
  EXPECT_EQ(t.device_seconds(), executor.last_step_stats().info.launch_seconds);
  executor.Reset();
  EXPECT_EQ(executor.slots().num_active(), 0);
  EXPECT_EQ(executor.last_step(), 0u);
}

// A device runner as the executor sees one: the cpu runner's tokens with a device's run info.
class DeviceLikeRunner final : public ModelRunner {
 public:
  DeviceLikeRunner(ModelRunner* inner, const StepRunInfo& info) : inner_(inner), info_(info) {}
  const model::ModelConfig& config() const override { return inner_->config(); }
  KvPoolInfo kv_pool() const override { return inner_->kv_pool(); }
  std::string backend_name() const override { return "device-like"; }
  int max_num_seqs() const override { return inner_->max_num_seqs(); }
  ModelLayerInfo layer_info() const override { return inner_->layer_info(); }
  void BeginSequence(int slot, const sampling::SamplingParams& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated) override {
    inner_->BeginSequence(slot, params, prompt, generated);
  }
  void EndSequence(int slot) override { inner_->EndSequence(slot); }
  absl::Status Step(std::span<const SequenceWork> batch, StepSamples* samples,
                    const FillPendingMasks& fill_pending_masks = {}) override {
    absl::Status status = inner_->Step(batch, samples, fill_pending_masks);
    samples->info = info_;
    return status;
  }
  absl::Status Forward(std::span<const SequenceWork> batch, StepLogits* logits) override {
    return inner_->Forward(batch, logits);
  }

 private:
  ModelRunner* inner_;
  StepRunInfo info_;
};

TEST_F(StepExecutorTest, DeviceRunInfoGoesIntoTimingsAndStats) {
  auto cpu = MakeRunner(4, 128);
  DeviceLikeRunner runner(cpu.get(), {.graph_replayed = true,
                                      .graph_captured = true,
                                      .graph_miss = std::nullopt,
                                      .launch_seconds = 0.25,
                                      .device_seconds = 0.5});
  StepExecutor executor(&runner, {.max_num_seqs = 2});
  SimRouter router(4, 128, 2);
  router.Add({.prompt = Prompt(6, 1), .max_tokens = 3});
  v1::StepResult result;
  const auto received = StepExecutor::Clock::now();
  ASSERT_TRUE(executor.Execute(router.NextPlan(), received, &result).ok());
  ASSERT_TRUE(router.OnResult(result));
  const v1::StepTimings& t = result.timings();
  EXPECT_EQ(t.device_seconds(), 0.5);
  EXPECT_GE(t.host_seconds(), 0.25) << "received -> Step entry + the runner's launch time";
  EXPECT_LT(t.host_seconds(), 0.25 + t.total_seconds());
  EXPECT_TRUE(t.graph_replayed());
  EXPECT_TRUE(executor.last_step_stats().info.graph_captured);
  Drive(executor, router);
  ExpectSameAsAlone(router.request(0), "through the device-like runner");
}

}  // namespace
}  // namespace tessera::worker
