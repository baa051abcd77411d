// Backpressure in the scheduler (issue 15, item 1): a paused request is not scheduled — running,
// it keeps its slot and blocks; waiting, admission passes over it — until it is unpaused.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/scheduler.h"
#include "tests/unit/router/scheduler_test_util.h"

namespace tessera::router {
namespace {

using testing::BasePolicyConfig;
using testing::Find;
using testing::MakeScheduler;
using testing::Prompt;

TEST(SchedulerPauseTest, PausedRunningRequestKeepsItsKvAndIsNotScheduled) {
  auto s = MakeScheduler(BasePolicyConfig(64, 4, 4, 16));
  ASSERT_TRUE(s->AddRequest(1, Prompt(5), 50).ok());
  ASSERT_TRUE(s->AddRequest(2, Prompt(5), 50).ok());
  ScheduledStep step;
  s->Schedule(&step);  // both prefill and sample
  ASSERT_EQ(step.requests.size(), 2u);
  ASSERT_TRUE(s->OnTokenSampled(1, 100).ok());
  ASSERT_TRUE(s->OnTokenSampled(2, 200).ok());
  ASSERT_TRUE(s->SetPaused(1, true).ok());
  const int32_t blocks = s->GetRequest(1)->num_blocks;
  for (int i = 0; i < 3; ++i) {
    s->Schedule(&step);
    ASSERT_EQ(step.requests.size(), 1u);
    EXPECT_EQ(step.requests[0].request_id, 2u) << "only the unpaused request decodes";
    ASSERT_TRUE(s->OnTokenSampled(2, 201 + i).ok());
  }
  RequestSnapshot paused = *s->GetRequest(1);
  EXPECT_TRUE(paused.running && paused.paused);
  EXPECT_EQ(paused.num_blocks, blocks);
  EXPECT_GE(paused.slot, 0);
  ASSERT_TRUE(s->SetPaused(1, false).ok());
  s->Schedule(&step);
  EXPECT_NE(Find(step, 1), nullptr) << "unpaused: scheduled again";
  EXPECT_EQ(s->SetPaused(99, true).code(), absl::StatusCode::kNotFound);
}

TEST(SchedulerPauseTest, AdmissionPassesOverAPausedWaitingRequest) {
  auto s = MakeScheduler(BasePolicyConfig(64, 4, 4, 16));
  ASSERT_TRUE(s->AddRequest(1, Prompt(5), 10).ok());
  ASSERT_TRUE(s->AddRequest(2, Prompt(5), 10).ok());
  ASSERT_TRUE(s->SetPaused(1, true).ok());
  ScheduledStep step;
  s->Schedule(&step);
  ASSERT_EQ(step.requests.size(), 1u);
  EXPECT_EQ(step.requests[0].request_id, 2u);
  EXPECT_FALSE(s->GetRequest(1)->running);
  ASSERT_TRUE(s->SetPaused(1, false).ok());
  ASSERT_TRUE(s->OnTokenSampled(2, 200).ok());
  s->Schedule(&step);
  EXPECT_NE(Find(step, 1), nullptr);
}

}  // namespace
}  // namespace tessera::router
