// Scheduler preemption (newest first, readmitted at the head, recomputed) and the optional
// policies (decode_stable, max_prefill_tokens_per_step). Exact numbers throughout.
#include <algorithm>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/scheduler.h"
#include "tests/unit/router/scheduler_test_util.h"

namespace tessera::router {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::EngineDriver;
using testing::Find;
using testing::Ids;
using testing::Prompt;
using testing::MakeScheduler;
using testing::BasePolicyConfig;

// Block size 4, 4 usable blocks. A and B (7-token prompts) fill the pool; C waits. When A's
// decode needs a third block, B (the newest) is preempted: its blocks and slot are freed and it
// goes back to the head of the queue, so it is re-admitted before C, recomputing prompt +
// generated tokens.
TEST(SchedulerPreemptionTest, PreemptsTheNewestAndReadmitsItAtTheHead) {
  auto s = MakeScheduler(BasePolicyConfig(64, 4, 4, 5));
  ASSERT_TRUE(s->AddRequest(1, Prompt(7), 3).ok());
  ASSERT_TRUE(s->AddRequest(2, Prompt(7), 3).ok());
  ScheduledStep step;
  s->Schedule(&step);  // plan 1
  EXPECT_THAT(Ids(step, *Find(step, 1)), ElementsAre(1, 2));
  EXPECT_THAT(Ids(step, *Find(step, 2)), ElementsAre(3, 4));
  ASSERT_TRUE(s->AddRequest(3, Prompt(2), 1).ok());

  s->Schedule(&step);  // plan 2: both decode at position 7 (still 2 blocks); no block for C
  ASSERT_EQ(step.requests.size(), 2u);
  EXPECT_EQ(s->stats().num_waiting, 1);
  ASSERT_TRUE(s->OnTokenSampled(1, 100).ok());  // result 1
  ASSERT_TRUE(s->OnTokenSampled(2, 200).ok());

  s->Schedule(&step);  // plan 3: A needs block 3 -> B preempted
  EXPECT_THAT(step.preempted, ElementsAre(2));
  EXPECT_THAT(step.dropped_slots, ElementsAre(1));
  ASSERT_EQ(step.requests.size(), 1u);
  EXPECT_EQ(step.requests[0].request_id, 1u);
  EXPECT_EQ(step.requests[0].start_position, 8);
  EXPECT_THAT(Ids(step, step.requests[0]), ElementsAre(3));
  RequestSnapshot b = *s->GetRequest(2);
  EXPECT_FALSE(b.running);
  EXPECT_EQ(b.slot, -1);
  EXPECT_EQ(b.num_blocks, 0);
  EXPECT_EQ(b.num_computed, 0);
  EXPECT_EQ(b.num_pending, 1);  // plan 2's token is still in flight
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(s->stats().num_preemptions, 1);
  EXPECT_EQ(s->stats().num_waiting, 2);

  ASSERT_TRUE(s->OnTokenSampled(1, 101).ok());  // result 2 reaches B while it waits
  ASSERT_TRUE(s->OnTokenSampled(2, 201).ok());
  EXPECT_EQ(s->GetRequest(2)->num_generated, 2);
  EXPECT_EQ(s->GetRequest(2)->num_pending, 0);

  s->Schedule(&step);  // A awaits its last token; B (head) needs 3 blocks, 1 free: nobody
  EXPECT_TRUE(step.empty());
  EXPECT_EQ(*s->OnTokenSampled(1, 102), SampleOutcome::kFinishedLength);  // result 3

  s->Schedule(&step);  // B first (head), then C
  ASSERT_EQ(step.requests.size(), 2u);
  const ScheduledRequest& rb = step.requests[0];
  EXPECT_EQ(rb.request_id, 2u);
  EXPECT_TRUE(rb.is_new && rb.is_prefill && rb.samples);
  EXPECT_EQ(rb.slot, 0);
  EXPECT_EQ(rb.num_tokens, 9);
  EXPECT_EQ(rb.num_known_tokens, 9);
  EXPECT_EQ(rb.num_prompt_tokens, 7);
  EXPECT_THAT(s->Tokens(2), ElementsAre(1, 2, 3, 4, 5, 6, 7, 200, 201));
  EXPECT_THAT(Ids(step, rb), ElementsAre(1, 2, 3));
  EXPECT_EQ(step.requests[1].request_id, 3u);
  EXPECT_EQ(step.requests[1].slot, 1);
  EXPECT_THAT(Ids(step, step.requests[1]), ElementsAre(4));
  EXPECT_THAT(step.dropped_slots, ElementsAre(0));
  EXPECT_TRUE(s->GetRequest(2)->awaiting_last_token);  // 2 generated + 1 pending = max_tokens
}

// B (newest) is the one that needs a block while A does not: B preempts itself.
TEST(SchedulerPreemptionTest, TheNewestPreemptsItselfWhenItIsTheOneShortOfBlocks) {
  auto s = MakeScheduler(BasePolicyConfig(64, 4, 4, 5));
  ASSERT_TRUE(s->AddRequest(1, Prompt(5), 4).ok());
  ASSERT_TRUE(s->AddRequest(2, Prompt(8), 5).ok());
  ScheduledStep step;
  s->Schedule(&step);
  EXPECT_EQ(s->stats().num_blocks_used, 4);
  s->Schedule(&step);  // A decodes at 5 (fits); B at 8 needs a 5th block
  EXPECT_THAT(step.preempted, ElementsAre(2));
  EXPECT_THAT(step.dropped_slots, ElementsAre(1));
  ASSERT_EQ(step.requests.size(), 1u);
  EXPECT_EQ(step.requests[0].request_id, 1u);
  EXPECT_EQ(s->stats().num_blocks_used, 2);
  EXPECT_EQ(s->stats().num_running, 1);
}

// The engine contract (result N before Schedule for N+2) is what makes a preempted request's
// pending token arrive before its re-admission; breaking it aborts.
TEST(SchedulerPreemptionDeathTest, ReadmittingWithATokenInFlightAborts) {
  auto s = MakeScheduler(BasePolicyConfig(64, 4, 4, 5));
  ASSERT_TRUE(s->AddRequest(1, Prompt(5), 4).ok());
  ASSERT_TRUE(s->AddRequest(2, Prompt(8), 5).ok());
  ScheduledStep step;
  s->Schedule(&step);
  s->Schedule(&step);  // B preempted with plan 1's token in flight
  ASSERT_TRUE(s->Finish(1, FinishReason::kCancelled).ok());
  EXPECT_DEATH(s->Schedule(&step), "re-admitting a preempted request with a token in flight");
}

// Under a pool too small for everyone, preempted requests recompute and still finish; the
// last admission of each request schedules exactly prompt + generated - 1 tokens.
TEST(SchedulerPreemptionTest, PreemptedRequestsFinishAndConserveTokens) {
  auto s = MakeScheduler(BasePolicyConfig(32, 8, 4, 17));  // 16 blocks = 64 positions
  EngineDriver d(*s);
  for (RequestId id = 1; id <= 8; ++id) ASSERT_TRUE(d.Add(id, 10 + static_cast<int>(id), 20).ok());
  d.RunToIdle();
  EXPECT_GT(d.num_preempted(), 0);
  EXPECT_EQ(s->stats().num_preemptions, d.num_preempted());
  for (auto& [id, sc] : d.scripts()) {
    EXPECT_TRUE(sc.finished);
    EXPECT_EQ(sc.reason, FinishReason::kLength);
    EXPECT_EQ(sc.tokens_this_admission, sc.num_prompt + 20 - 1) << id;
  }
  EXPECT_EQ(s->stats().num_blocks_used, 0);
}

// --- Policies ---------------------------------------------------------------------------------

enum Kind { kDecode, kPrefill, kMixed };

Kind KindOf(const ScheduledStep& step) {
  if (step.num_prefill_tokens == 0) return kDecode;
  return step.num_prefill_tokens == step.num_batched_tokens ? kPrefill : kMixed;
}

std::vector<Kind> RunKinds(const SchedulerConfig& c, int max_steps) {
  auto s = MakeScheduler(c);
  EngineDriver d(*s);
  EXPECT_TRUE(d.Add(1, 4, 12).ok());
  std::vector<Kind> kinds;
  for (int i = 0; i < max_steps && d.Turn(); ++i) {
    if (i == 0) {
      EXPECT_TRUE(d.Add(2, 30, 3).ok());
    }
    if (!d.step().empty()) kinds.push_back(KindOf(d.step()));
  }
  return kinds;
}

// Budget 16: request 1 decodes while request 2 prefills 30 tokens. Off: mixed steps. On:
// prefill-only and decode-only steps alternate while both have work, and nothing is mixed.
TEST(SchedulerPolicyTest, DecodeStableKeepsPrefillOutOfDecodeSteps) {
  SchedulerConfig c = BasePolicyConfig(16, 4, 4, 64);
  EXPECT_THAT(RunKinds(c, 4), ElementsAre(kPrefill, kMixed, kMixed, kDecode));
  c.decode_stable = true;
  EXPECT_THAT(RunKinds(c, 7),
              ElementsAre(kPrefill, kDecode, kPrefill, kDecode, kPrefill, kDecode, kDecode));
  const std::vector<Kind> all = RunKinds(c, 1000);
  EXPECT_EQ(std::count(all.begin(), all.end(), kMixed), 0);
}

// decode_stable: when the prefill turn cannot run (no block for the admission), the step
// decodes instead of idling.
TEST(SchedulerPolicyTest, DecodeStableFallsBackToDecodesWhenPrefillCannotRun) {
  SchedulerConfig c = BasePolicyConfig(16, 4, 4, 3);  // 2 usable blocks
  c.decode_stable = true;
  auto s = MakeScheduler(c);
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, 4, 5).ok());
  ASSERT_TRUE(d.Turn());  // prefill of 1: block 1
  ASSERT_TRUE(d.Add(2, 4, 1).ok());
  ASSERT_TRUE(d.Turn());  // decode turn: 1 decodes at position 4, takes block 2
  EXPECT_EQ(KindOf(d.step()), kDecode);
  ASSERT_TRUE(d.Turn());  // prefill turn, but 2 cannot get a block: 1 decodes again
  ASSERT_EQ(d.step().requests.size(), 1u);
  EXPECT_EQ(d.step().requests[0].request_id, 1u);
  EXPECT_EQ(d.step().requests[0].start_position, 5);
  d.RunToIdle();
  EXPECT_TRUE(d.scripts()[2].finished);
}

// Prefill cap 5 (budget 100): a 12-token prompt goes in chunks 5, 5, 2 while request 1 keeps
// decoding every step; a second new prompt waits while the cap is used up.
TEST(SchedulerPolicyTest, PrefillCapLimitsPrefillTokensPerStep) {
  SchedulerConfig c = BasePolicyConfig(100, 4, 4, 64);
  c.max_prefill_tokens_per_step = 5;
  auto s = MakeScheduler(c);
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, 4, 20).ok());
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(d.step().requests.at(0).num_tokens, 4);
  ASSERT_TRUE(d.Add(2, 12, 2).ok());
  ASSERT_TRUE(d.Add(3, 3, 2).ok());
  std::vector<int> chunks_of_2;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(d.Turn());
    const ScheduledStep& step = d.step();
    EXPECT_EQ(Find(step, 1)->num_tokens, 1);  // decodes are not capped
    chunks_of_2.push_back(Find(step, 2)->num_tokens);
    EXPECT_LE(step.num_prefill_tokens, 5);
    if (i < 2) {
      EXPECT_EQ(Find(step, 3), nullptr);
    }
  }
  EXPECT_THAT(chunks_of_2, ElementsAre(5, 5, 2));
  EXPECT_EQ(Find(d.step(), 3)->num_tokens, 3);  // 2 + 3 = the cap
  c.max_prefill_tokens_per_step = 0;  // off: the whole prompt in one step
  auto uncapped = MakeScheduler(c);
  ASSERT_TRUE(uncapped->AddRequest(2, Prompt(12), 2).ok());
  ScheduledStep step;
  uncapped->Schedule(&step);
  EXPECT_EQ(step.requests.at(0).num_tokens, 12);
  EXPECT_THAT(step.preempted, IsEmpty());
}

}  // namespace
}  // namespace tessera::router
