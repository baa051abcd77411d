// Fair progress under KV pressure (issue 15, item 3; policy in router/scheduler_admission.cc):
// the growth reservation at admission, short requests backfilling past a blocked head (at most
// max_overtakes times), and the victim choice that spares a request that has not made progress
// since its admission. Each test runs the policy against the one before it (reservation off),
// so it pins what changed.
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/scheduler.h"
#include "tests/unit/router/scheduler_test_util.h"

namespace tessera::router {
namespace {

using ::testing::ElementsAre;
using testing::BasePolicyConfig;
using testing::EngineDriver;
using testing::Find;
using testing::MakeScheduler;

// Block size 4, 4 usable blocks. A (4-token prompt, 12 tokens: 15 positions = the whole pool)
// runs; B, the same size, arrives after A's first step.
//  - Reservation off: B's first chunk (1 block) fits, so B is admitted, and A's growth evicts
//    it (B recomputes later): churn.
//  - Horizon 8: B needs 3 blocks of its own + A's growth over 8 tokens (3 blocks) > 3 free, so
//    it waits until A is done and nobody is ever preempted.
TEST(SchedulerFairnessTest, TheReservationKeepsANewcomerOutRatherThanEvictingItLater) {
  for (const int horizon : {0, 8}) {
    SchedulerConfig c = BasePolicyConfig(64, 4, 4, 5);
    c.reserve_horizon_tokens = horizon;
    auto s = MakeScheduler(c);
    EngineDriver d(*s);
    ASSERT_TRUE(d.Add(1, 4, 12).ok());
    d.Turn();
    ASSERT_TRUE(d.Add(2, 4, 12).ok());
    d.RunToIdle();
    EXPECT_TRUE(d.scripts().at(1).finished && d.scripts().at(2).finished);
    EXPECT_EQ(d.scripts().at(2).generated, 12);
    if (horizon == 0) {
      EXPECT_GE(d.num_preempted(), 1) << "the policy before the reservation churns here";
      EXPECT_EQ(d.scripts().at(2).admitted_at_step, 2);
    } else {
      EXPECT_EQ(d.num_preempted(), 0);
      EXPECT_GT(d.scripts().at(2).admitted_at_step, d.scripts().at(1).first_sample_step + 10)
          << "B must wait for A's room";
    }
    EXPECT_EQ(s->stats().num_blocks_used, 0);
  }
}

// Block size 4, 10 usable blocks. A (prompt 4, 36 tokens: 39 positions = the whole pool) has
// 20 tokens when L (a long request) and three short ones S1..S3 (prompt 2, 3 tokens) arrive, in
// that order. L needs its 3 blocks + A's growth (3) > 4 free: it blocks the head of the queue.
// The short ones fit within the reservation, so S1 and S2 overtake L (max_overtakes = 2) and
// finish without a preemption; S3 may not overtake a third time and goes after L.
TEST(SchedulerFairnessTest, ShortRequestsBackfillPastABlockedHeadAtMostMaxOvertakesTimes) {
  SchedulerConfig c = BasePolicyConfig(64, 8, 4, 11);
  c.reserve_horizon_tokens = 8;
  c.max_overtakes = 2;
  auto s = MakeScheduler(c);
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, 4, 36).ok());
  while (d.scripts().at(1).generated < 20) d.Turn();
  const int64_t arrival = d.num_steps();
  ASSERT_TRUE(d.Add(2, 4, 20).ok());  // L
  for (RequestId id : {3, 4, 5}) ASSERT_TRUE(d.Add(id, 2, 3).ok());
  d.RunToIdle();
  const auto& sc = d.scripts();
  for (RequestId id : {1, 2, 3, 4, 5}) {
    EXPECT_TRUE(sc.at(id).finished) << id;
    EXPECT_EQ(sc.at(id).generated, sc.at(id).max_tokens) << id;
  }
  EXPECT_EQ(d.num_preempted(), 0);
  EXPECT_LT(sc.at(3).admitted_at_step, sc.at(2).admitted_at_step);
  EXPECT_LT(sc.at(4).admitted_at_step, sc.at(2).admitted_at_step);
  EXPECT_GT(sc.at(5).admitted_at_step, sc.at(2).admitted_at_step - 1)
      << "S3 overtook the head a third time";
  // The two backfilled requests start at once: their first token is planned within 2 steps.
  EXPECT_LE(sc.at(3).first_sample_step - arrival, 2);
  EXPECT_LE(sc.at(4).first_sample_step - arrival, 2);
  // L waited for A: it is admitted only once A's end is near enough for its reservation.
  EXPECT_GT(sc.at(2).admitted_at_step, sc.at(4).first_sample_step);
}

// With the reservation off (the base policy), strict FCFS: nobody overtakes a blocked head.
TEST(SchedulerFairnessTest, WithoutTheReservationTheQueueIsStrictlyFcfs) {
  SchedulerConfig c = BasePolicyConfig(64, 8, 4, 11);
  auto s = MakeScheduler(c);
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, 4, 36).ok());
  while (d.scripts().at(1).generated < 30) d.Turn();
  ASSERT_TRUE(d.Add(2, 30, 4).ok());  // 8 blocks for its prompt: does not fit next to A
  ASSERT_TRUE(d.Add(3, 2, 3).ok());
  d.RunToIdle();
  EXPECT_LE(d.scripts().at(2).admitted_at_step, d.scripts().at(3).admitted_at_step);
}

// Bounded churn. Block size 4, budget 6, 5 usable blocks. A and B (2-token prompts) decode; C
// (9-token prompt) is admitted in plan 2 and prefills in chunks, sampling nothing before plan 4.
// In plan 4 A and B each cross into a new block, and only one is free: the newest request is C,
// which has not made progress since its admission, so B (which has) is preempted instead. The
// base policy would have thrown C's two prefill chunks away.
TEST(SchedulerFairnessTest, AVictimThatHasNotProgressedSinceItsAdmissionIsSpared) {
  SchedulerConfig c = BasePolicyConfig(6, 4, 4, 6);
  auto s = MakeScheduler(c);
  ASSERT_TRUE(s->AddRequest(1, testing::Prompt(2), 12).ok());
  ASSERT_TRUE(s->AddRequest(2, testing::Prompt(2), 12).ok());
  ScheduledStep step;
  s->Schedule(&step);  // plan 1: A, B prefill (1 block each)
  ASSERT_TRUE(s->AddRequest(3, testing::Prompt(9), 4).ok());
  s->Schedule(&step);  // plan 2: A, B decode; C's first chunk (4 tokens, 1 block)
  ASSERT_NE(Find(step, 3), nullptr);
  EXPECT_FALSE(Find(step, 3)->samples);
  ASSERT_TRUE(s->OnTokenSampled(1, 100).ok());  // result 1
  ASSERT_TRUE(s->OnTokenSampled(2, 200).ok());
  s->Schedule(&step);  // plan 3: A, B decode at position 3; C's second chunk (1 more block)
  EXPECT_FALSE(Find(step, 3)->samples);
  EXPECT_EQ(s->stats().num_blocks_used, 4);
  ASSERT_TRUE(s->OnTokenSampled(1, 101).ok());  // result 2
  ASSERT_TRUE(s->OnTokenSampled(2, 201).ok());

  s->Schedule(&step);  // plan 4: A takes the last block; B needs one: B, not C, goes
  EXPECT_THAT(step.preempted, ElementsAre(2));
  ASSERT_NE(Find(step, 3), nullptr);
  EXPECT_TRUE(Find(step, 3)->samples) << "C finishes its prefill and samples";
  EXPECT_EQ(s->stats().num_preemptions_without_progress, 0);
  EXPECT_TRUE(s->GetRequest(3)->running);
  EXPECT_EQ(s->GetRequest(3)->num_preemptions, 0);
}

// When neither the request short of blocks nor any newer one has progressed, the newest goes
// anyway (somebody must), and the scheduler counts it. Block size 1, 4 usable blocks, budget 3:
// A (2 tokens) samples in plan 1, B's first chunk takes the 3rd block; in plan 2 A's decode
// takes the last block and B, the newest and still prefilling, preempts itself.
TEST(SchedulerFairnessTest, WithoutAProgressedCandidateTheNewestGoesAndIsCounted) {
  auto s = MakeScheduler(BasePolicyConfig(3, 4, 1, 5));
  ASSERT_TRUE(s->AddRequest(1, testing::Prompt(2), 3).ok());
  ASSERT_TRUE(s->AddRequest(2, testing::Prompt(4), 1).ok());
  ScheduledStep step;
  s->Schedule(&step);  // plan 1
  ASSERT_EQ(step.requests.size(), 2u);
  EXPECT_TRUE(Find(step, 1)->samples);
  EXPECT_FALSE(Find(step, 2)->samples);
  s->Schedule(&step);  // plan 2
  EXPECT_THAT(step.preempted, ElementsAre(2));
  EXPECT_EQ(s->stats().num_preemptions_without_progress, 1);
  EXPECT_EQ(s->stats().num_preemptions, 1);
}

}  // namespace
}  // namespace tessera::router
