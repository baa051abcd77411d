// Scheduler: request lifecycle, one step in flight, token conservation, chunking, FCFS, slots,
// max_tokens and the errors a client can get. Exact numbers throughout (block ids included).
#include "router/scheduler.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/router/scheduler_test_util.h"

namespace tessera::router {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::EngineDriver;
using testing::Find;
using testing::Ids;
using testing::Prompt;
using testing::MakeScheduler;
using testing::BasePolicyConfig;

TEST(SchedulerTest, BadConfigIsRejectedNamingTheField) {
  SchedulerConfig c = BasePolicyConfig(16, 4, 4, 1);
  absl::StatusOr<std::unique_ptr<Scheduler>> s = Scheduler::Create(c);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("num_blocks"));
  c = BasePolicyConfig(0, 4, 4, 8);
  EXPECT_THAT(Scheduler::Create(c).status().message(), HasSubstr("max_num_batched_tokens"));
}

TEST(SchedulerTest, NoWorkGivesAnEmptyStep) {
  auto s = MakeScheduler(BasePolicyConfig(16, 4, 4, 8));
  ScheduledStep step;
  s->Schedule(&step);
  EXPECT_TRUE(step.empty());
  EXPECT_EQ(step.num_batched_tokens, 0);
  EXPECT_EQ(s->stats().num_steps, 0);
}

// prompt 6, max_tokens 3, block size 4: the whole life of one request, with plan N+1 planned
// before result N arrives. Scheduled tokens: 6 + 1 + 1 = prompt + generated - 1.
TEST(SchedulerTest, OneRequestWithOneStepInFlight) {
  auto s = MakeScheduler(BasePolicyConfig(100, 4, 4, 9));
  ASSERT_TRUE(s->AddRequest(1, Prompt(6), 3).ok());
  ScheduledStep step;

  s->Schedule(&step);  // plan 1: the whole prompt, samples token 1
  ASSERT_EQ(step.requests.size(), 1u);
  ScheduledRequest r = step.requests[0];
  EXPECT_EQ(r.request_id, 1u);
  EXPECT_EQ(r.slot, 0);
  EXPECT_TRUE(r.is_new && r.is_prefill && r.samples);
  EXPECT_EQ(r.start_position, 0);
  EXPECT_EQ(r.num_tokens, 6);
  EXPECT_EQ(r.num_prompt_tokens, 6);
  EXPECT_EQ(r.num_known_tokens, 6);
  EXPECT_THAT(Ids(step, r), ElementsAre(1, 2));
  EXPECT_THAT(s->Tokens(1), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(s->GetRequest(1)->num_pending, 1);

  s->Schedule(&step);  // plan 2 before result 1: decodes the pending token 1
  r = step.requests.at(0);
  EXPECT_FALSE(r.is_new || r.is_prefill);
  EXPECT_TRUE(r.samples);
  EXPECT_EQ(r.start_position, 6);
  EXPECT_EQ(r.num_tokens, 1);
  EXPECT_THAT(Ids(step, r), IsEmpty());
  EXPECT_EQ(s->GetRequest(1)->num_pending, 2);

  ASSERT_EQ(*s->OnTokenSampled(1, 50), SampleOutcome::kContinue);  // result 1
  EXPECT_EQ(s->GetRequest(1)->num_generated, 1);
  EXPECT_EQ(s->GetRequest(1)->num_pending, 1);

  s->Schedule(&step);  // plan 3: decodes token 2, samples token 3 = max_tokens
  r = step.requests.at(0);
  EXPECT_EQ(r.start_position, 7);
  EXPECT_THAT(Ids(step, r), IsEmpty());  // 8 positions still fit 2 blocks
  RequestSnapshot snap = *s->GetRequest(1);
  EXPECT_TRUE(snap.awaiting_last_token);
  EXPECT_EQ(snap.num_generated + snap.num_pending, 3);
  EXPECT_EQ(snap.num_computed, 8);  // 6 + 1 + 1

  s->Schedule(&step);  // nothing left to schedule: not sent
  EXPECT_TRUE(step.empty());

  ASSERT_EQ(*s->OnTokenSampled(1, 51), SampleOutcome::kContinue);
  ASSERT_EQ(*s->OnTokenSampled(1, 52), SampleOutcome::kFinishedLength);
  EXPECT_FALSE(s->GetRequest(1).has_value());
  EXPECT_EQ(s->stats().num_blocks_used, 0);
  EXPECT_EQ(s->stats().num_running, 0);
  EXPECT_EQ(s->stats().num_finished[static_cast<size_t>(FinishReason::kLength)], 1);

  s->Schedule(&step);  // no work: a drop-only plan frees the worker's slot 0 at once
  EXPECT_TRUE(step.empty());
  EXPECT_TRUE(step.ShouldSend());
  EXPECT_THAT(step.dropped_slots, ElementsAre(0));
  s->Schedule(&step);  // dropped once only
  EXPECT_FALSE(step.ShouldSend());
  ASSERT_TRUE(s->AddRequest(2, Prompt(2), 1).ok());
  s->Schedule(&step);
  EXPECT_THAT(step.dropped_slots, IsEmpty());
  r = step.requests.at(0);
  EXPECT_EQ(r.slot, 0);  // the freed slot is handed out again
  EXPECT_THAT(Ids(step, r), ElementsAre(1));
}

// Stop seen in token 2 of prompt 5: plan 3 (decode of token 2) was already out, so one
// scheduled token is wasted: 5 + 1 + 1 = prompt + generated - 1 + 1.
TEST(SchedulerTest, LateStopWastesExactlyOneScheduledToken) {
  auto s = MakeScheduler(BasePolicyConfig(100, 4, 4, 9));
  ASSERT_TRUE(s->AddRequest(1, Prompt(5), 10).ok());
  ScheduledStep step;
  int scheduled = 0;
  s->Schedule(&step);
  scheduled += step.num_batched_tokens;
  s->Schedule(&step);
  scheduled += step.num_batched_tokens;
  ASSERT_TRUE(s->OnTokenSampled(1, 40).ok());  // result 1: token 1, no stop
  s->Schedule(&step);
  scheduled += step.num_batched_tokens;
  ASSERT_TRUE(s->OnTokenSampled(1, 41).ok());  // result 2: token 2 is a stop
  ASSERT_TRUE(s->Finish(1, FinishReason::kStop).ok());
  EXPECT_EQ(scheduled, 5 + 2 - 1 + 1);
  // Result 3 (the wasted token) arrives for a finished request.
  EXPECT_EQ(s->OnTokenSampled(1, 42).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s->Finish(1, FinishReason::kStop).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s->stats().num_blocks_used, 0);
  EXPECT_EQ(s->stats().num_finished[static_cast<size_t>(FinishReason::kStop)], 1);
}

// Conservation through the engine driver, for finishes by length and by stop: the last
// admission's scheduled tokens are prompt + generated - 1 (+ the late-stop token).
TEST(SchedulerTest, TokenConservation) {
  auto s = MakeScheduler(BasePolicyConfig(32, 8, 4, 64));
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, 40, 5).ok());      // chunked prefill (budget 32), finishes by length
  ASSERT_TRUE(d.Add(2, 3, 9, 4).ok());    // stop in token 4
  ASSERT_TRUE(d.Add(3, 17, 1).ok());      // max_tokens 1: prefill only
  ASSERT_TRUE(d.Add(4, 1, 6, 6).ok());    // stop on the last allowed token
  d.RunToIdle();
  auto& sc = d.scripts();
  EXPECT_EQ(sc[1].tokens_this_admission, 40 + 5 - 1);
  EXPECT_EQ(sc[1].reason, FinishReason::kLength);
  EXPECT_EQ(sc[2].tokens_this_admission, 3 + 4 - 1 + 1);
  EXPECT_EQ(sc[2].wasted, 1);
  EXPECT_EQ(sc[3].tokens_this_admission, 17);
  EXPECT_EQ(sc[4].tokens_this_admission, 1 + 6 - 1);
  EXPECT_EQ(sc[4].reason, FinishReason::kLength);  // max_tokens reached before the stop check
  for (auto& [id, script] : sc) {
    EXPECT_EQ(script.tokens_this_admission,
              script.num_prompt + script.generated - 1 + script.wasted) << id;
  }
  EXPECT_EQ(s->stats().num_blocks_used, 0);
}

// Budget 8, block size 4: a 20-token prompt takes three steps (8, 8, 4); the 3-token prompt
// behind it waits until the step where budget is left, then fits in the remaining 4.
TEST(SchedulerTest, ChunkingAndDeferredAdmissionUnderATightBudget) {
  auto s = MakeScheduler(BasePolicyConfig(8, 4, 4, 32));
  ASSERT_TRUE(s->AddRequest(1, Prompt(20), 4).ok());
  ASSERT_TRUE(s->AddRequest(2, Prompt(3), 4).ok());
  ScheduledStep step;

  s->Schedule(&step);
  ASSERT_EQ(step.requests.size(), 1u);
  EXPECT_EQ(step.requests[0].num_tokens, 8);
  EXPECT_FALSE(step.requests[0].samples);
  EXPECT_THAT(Ids(step, step.requests[0]), ElementsAre(1, 2));
  EXPECT_EQ(s->stats().num_waiting, 1);

  s->Schedule(&step);
  ASSERT_EQ(step.requests.size(), 1u);
  EXPECT_FALSE(step.requests[0].is_new);
  EXPECT_TRUE(step.requests[0].is_prefill);
  EXPECT_EQ(step.requests[0].start_position, 8);
  EXPECT_EQ(step.requests[0].num_tokens, 8);
  EXPECT_THAT(Ids(step, step.requests[0]), ElementsAre(3, 4));

  s->Schedule(&step);
  ASSERT_EQ(step.requests.size(), 2u);
  EXPECT_EQ(step.requests[0].start_position, 16);
  EXPECT_EQ(step.requests[0].num_tokens, 4);
  EXPECT_TRUE(step.requests[0].samples);
  EXPECT_THAT(Ids(step, step.requests[0]), ElementsAre(5));
  const ScheduledRequest& b = step.requests[1];
  EXPECT_EQ(b.request_id, 2u);
  EXPECT_TRUE(b.is_new && b.samples);
  EXPECT_EQ(b.slot, 1);
  EXPECT_EQ(b.num_tokens, 3);
  EXPECT_THAT(Ids(step, b), ElementsAre(6));
  EXPECT_EQ(step.num_batched_tokens, 7);
}

// A new prompt longer than the remaining budget is chunked to it (admission side).
TEST(SchedulerTest, AdmissionChunksThePromptToTheRemainingBudget) {
  auto s = MakeScheduler(BasePolicyConfig(10, 4, 4, 32));
  ASSERT_TRUE(s->AddRequest(1, Prompt(6), 4).ok());
  ASSERT_TRUE(s->AddRequest(2, Prompt(9), 4).ok());
  ScheduledStep step;
  s->Schedule(&step);
  ASSERT_EQ(step.requests.size(), 2u);
  EXPECT_EQ(step.requests[1].request_id, 2u);
  EXPECT_EQ(step.requests[1].num_tokens, 4);
  EXPECT_FALSE(step.requests[1].samples);
  EXPECT_EQ(step.num_batched_tokens, 10);
}

// Budget 3 with two decodes running: the prefill behind them gets the last token of budget,
// every step, until its prompt is done.
TEST(SchedulerTest, APrefillChunkTakesTheBudgetLeftDownToOneToken) {
  auto s = MakeScheduler(BasePolicyConfig(3, 4, 4, 32));
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, 1, 10).ok());
  ASSERT_TRUE(d.Add(2, 1, 10).ok());
  ASSERT_TRUE(d.Add(3, 5, 2).ok());
  std::vector<int32_t> starts;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(d.Turn());
    EXPECT_EQ(d.step().num_batched_tokens, 3);
    const ScheduledRequest* c = Find(d.step(), 3);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->num_tokens, 1);
    EXPECT_EQ(c->samples, i == 4);
    starts.push_back(c->start_position);
  }
  EXPECT_THAT(starts, ElementsAre(0, 1, 2, 3, 4));
}

// Budget 16: request 1 decodes while request 2's 30-token prompt arrives; the next step carries
// both the decode and a 15-token prefill chunk.
TEST(SchedulerTest, MixedPrefillAndDecodeStepsUnderLoad) {
  auto s = MakeScheduler(BasePolicyConfig(16, 4, 4, 32));
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, 4, 20).ok());
  ASSERT_TRUE(d.Turn());  // prefill of 1
  ASSERT_TRUE(d.Turn());  // decode of 1
  ASSERT_TRUE(d.Add(2, 30, 2).ok());
  ASSERT_TRUE(d.Turn());
  const ScheduledStep& step = d.step();
  ASSERT_EQ(step.requests.size(), 2u);
  EXPECT_FALSE(step.requests[0].is_prefill);
  EXPECT_EQ(step.requests[0].num_tokens, 1);
  EXPECT_TRUE(step.requests[1].is_prefill);
  EXPECT_EQ(step.requests[1].num_tokens, 15);
  EXPECT_EQ(step.num_batched_tokens, 16);
  EXPECT_EQ(step.num_prefill_tokens, 15);
  d.RunToIdle();
  EXPECT_GE(d.num_mixed_steps(), 2);
}

TEST(SchedulerTest, AdmissionIsFirstComeFirstServed) {
  auto s = MakeScheduler(BasePolicyConfig(100, 2, 4, 32));
  EngineDriver d(*s);
  for (RequestId id = 1; id <= 5; ++id) ASSERT_TRUE(d.Add(id, 2, 2).ok());
  d.RunToIdle();
  EXPECT_EQ(d.admissions(),
            (std::vector<std::vector<RequestId>>{{1, 2}, {3, 4}, {5}}));
}

// Slots: two slots, freed at finish, dropped in the next plan and reused, never doubled.
TEST(SchedulerTest, SlotsAreReusedAndNeverDuplicated) {
  auto s = MakeScheduler(BasePolicyConfig(100, 2, 4, 32));
  for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(s->AddRequest(id, Prompt(2), 50).ok());
  ScheduledStep step;
  s->Schedule(&step);
  ASSERT_EQ(step.requests.size(), 2u);
  EXPECT_EQ(step.requests[0].slot, 0);
  EXPECT_EQ(step.requests[1].slot, 1);
  EXPECT_EQ(s->GetRequest(3)->slot, -1);  // waiting: no slot free
  ASSERT_TRUE(s->Finish(1, FinishReason::kCancelled).ok());
  ASSERT_TRUE(s->OnTokenSampled(2, 9).ok());
  s->Schedule(&step);
  EXPECT_THAT(step.dropped_slots, ElementsAre(0));
  ASSERT_EQ(step.requests.size(), 2u);
  EXPECT_EQ(Find(step, 2)->slot, 1);
  EXPECT_EQ(Find(step, 3)->slot, 0);
  EXPECT_TRUE(Find(step, 3)->is_new);
  EXPECT_EQ(s->stats().num_finished[static_cast<size_t>(FinishReason::kCancelled)], 1);
}

TEST(SchedulerTest, MaxTokensOneIsPrefillOnly) {
  auto s = MakeScheduler(BasePolicyConfig(100, 4, 4, 32));
  ASSERT_TRUE(s->AddRequest(1, Prompt(3), 1).ok());
  ScheduledStep step;
  s->Schedule(&step);
  ASSERT_TRUE(step.requests.at(0).samples);
  EXPECT_TRUE(s->GetRequest(1)->awaiting_last_token);
  s->Schedule(&step);
  EXPECT_TRUE(step.empty());
  EXPECT_EQ(*s->OnTokenSampled(1, 5), SampleOutcome::kFinishedLength);
  EXPECT_EQ(s->stats().num_blocks_used, 0);
}

TEST(SchedulerTest, OnTokenSampledRejectsTokensNobodyAsked) {
  auto s = MakeScheduler(BasePolicyConfig(100, 4, 4, 32));
  EXPECT_EQ(s->OnTokenSampled(9, 1).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(s->AddRequest(1, Prompt(3), 4).ok());
  EXPECT_EQ(s->OnTokenSampled(1, 1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SchedulerTest, FullWaitingQueueIsResourceExhausted) {
  SchedulerConfig c = BasePolicyConfig(100, 4, 4, 32);
  c.max_waiting = 2;
  auto s = MakeScheduler(c);
  ASSERT_TRUE(s->AddRequest(1, Prompt(3), 4).ok());
  ASSERT_TRUE(s->AddRequest(2, Prompt(3), 4).ok());
  const absl::Status full = s->AddRequest(3, Prompt(3), 4);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("waiting queue is full (2 requests)"));
  ScheduledStep step;
  s->Schedule(&step);  // both admitted: room again
  EXPECT_TRUE(s->AddRequest(3, Prompt(3), 4).ok());
}

TEST(SchedulerTest, BadRequestsAreInvalidArgumentsWithActionableMessages) {
  SchedulerConfig c = BasePolicyConfig(100, 4, 4, 5);  // 4 usable blocks = 16 positions
  c.max_context = 20;
  auto s = MakeScheduler(c);
  EXPECT_EQ(s->AddRequest(1, {}, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->AddRequest(1, Prompt(3), 0).code(), absl::StatusCode::kInvalidArgument);
  // 10 + 7 - 1 = 16 positions: exactly the pool.
  EXPECT_TRUE(s->AddRequest(1, Prompt(10), 7).ok());
  EXPECT_EQ(s->AddRequest(1, Prompt(3), 4).code(), absl::StatusCode::kAlreadyExists);
  const absl::Status pool = s->AddRequest(2, Prompt(10), 8);
  EXPECT_EQ(pool.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pool.message(), HasSubstr("needs 5 KV blocks of 4 tokens, but the worker's KV "
                                        "pool holds only 4 blocks (16 tokens)"));
  const absl::Status context = s->AddRequest(3, Prompt(15), 6);
  EXPECT_EQ(context.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(context.message(), HasSubstr("= 21 exceeds the model's context of 20 tokens"));
}

// A request that no longer fits the pool after the worker came back smaller fails in the step
// with a message instead of waiting forever; the one behind it is admitted.
TEST(SchedulerTest, RequestTooBigForThePoolFailsInTheStep) {
  auto s = MakeScheduler(BasePolicyConfig(100, 4, 4, 33));
  ASSERT_TRUE(s->AddRequest(1, Prompt(40), 20).ok());  // 59 positions: 15 blocks
  ASSERT_TRUE(s->AddRequest(2, Prompt(4), 2).ok());
  ASSERT_TRUE(s->Reconfigure(BasePolicyConfig(100, 4, 4, 9)).ok());  // 8 blocks now
  ScheduledStep step;
  s->Schedule(&step);
  ASSERT_EQ(step.failed.size(), 1u);
  EXPECT_EQ(step.failed[0].request_id, 1u);
  EXPECT_EQ(step.failed[0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(step.failed[0].status.message(), HasSubstr("needs 15 KV blocks"));
  EXPECT_FALSE(s->GetRequest(1).has_value());
  ASSERT_EQ(step.requests.size(), 1u);
  EXPECT_EQ(step.requests[0].request_id, 2u);
  EXPECT_EQ(s->stats().num_failed, 1);
  EXPECT_EQ(s->stats().num_blocks_total, 8);
}

TEST(SchedulerTest, ReconfigureRefusesWhileRequestsRun) {
  auto s = MakeScheduler(BasePolicyConfig(100, 4, 4, 33));
  ASSERT_TRUE(s->AddRequest(1, Prompt(4), 2).ok());
  ScheduledStep step;
  s->Schedule(&step);
  EXPECT_EQ(s->Reconfigure(BasePolicyConfig(100, 4, 4, 9)).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(s->Finish(1, FinishReason::kError).ok());
  EXPECT_TRUE(s->Reconfigure(BasePolicyConfig(100, 4, 4, 9)).ok());
}

// Cancelled mid-prefill (running) and while waiting: all blocks come back, the slot is dropped.
TEST(SchedulerTest, CancelledRequestsReturnEveryBlock) {
  auto s = MakeScheduler(BasePolicyConfig(4, 4, 4, 32));
  ASSERT_TRUE(s->AddRequest(1, Prompt(20), 4).ok());
  ASSERT_TRUE(s->AddRequest(2, Prompt(20), 4).ok());
  ScheduledStep step;
  s->Schedule(&step);
  s->Schedule(&step);
  EXPECT_EQ(s->GetRequest(1)->num_computed, 8);
  EXPECT_EQ(s->stats().num_blocks_used, 2);
  EXPECT_EQ(s->stats().num_waiting, 1);
  ASSERT_TRUE(s->Finish(1, FinishReason::kCancelled).ok());
  ASSERT_TRUE(s->Finish(2, FinishReason::kCancelled).ok());
  const SchedulerStats st = s->stats();
  EXPECT_EQ(st.num_blocks_used, 0);
  EXPECT_EQ(st.num_running, 0);
  EXPECT_EQ(st.num_waiting, 0);
  ASSERT_TRUE(s->AddRequest(3, Prompt(1), 1).ok());
  s->Schedule(&step);
  EXPECT_THAT(step.dropped_slots, ElementsAre(0));
}

TEST(SchedulerDeathTest, AThirdTokenInFlightAborts) {
  auto s = MakeScheduler(BasePolicyConfig(100, 4, 4, 32));
  ASSERT_TRUE(s->AddRequest(1, Prompt(3), 10).ok());
  ScheduledStep step;
  s->Schedule(&step);
  s->Schedule(&step);
  EXPECT_DEATH(s->Schedule(&step), "third token in flight");
}

}  // namespace
}  // namespace tessera::router
