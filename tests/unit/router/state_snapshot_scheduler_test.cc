// The scheduler for a hybrid model (SchedulerConfig::state_snapshot_slots > 0): an admission's
// prefill is cut at its prompt's last full block and the chunk that ends there saves a state
// snapshot; a later admission hits cached blocks only up to a block carrying a snapshot, and
// restores it; cached blocks without one run cold (counted); the least recently used snapshot
// is taken back when the ids run out. Block size 4 everywhere (the random test covers the
// invariants under load: scheduler_random_test.cc, "_state_snapshots").
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/scheduler.h"
#include "tests/unit/router/scheduler_test_util.h"

namespace tessera::router {
namespace {

using testing::EngineDriver;
using testing::Find;
using testing::MakeScheduler;
using testing::Prompt;

SchedulerConfig Config(int snapshot_slots) {
  SchedulerConfig c = testing::BasePolicyConfig(100, 4, 4, 32);
  c.enable_prefix_cache = true;
  c.state_snapshot_slots = snapshot_slots;
  return c;
}

// Admits `id` alone and returns its first (is_new) entry.
ScheduledRequest AdmitAlone(EngineDriver& d, RequestId id, const std::vector<int32_t>& prompt) {
  EXPECT_TRUE(d.Add(id, prompt, 1).ok());
  EXPECT_TRUE(d.Turn());
  const ScheduledRequest* r = Find(d.step(), id);
  EXPECT_NE(r, nullptr);
  return r == nullptr ? ScheduledRequest() : *r;
}

TEST(StateSnapshotSchedulerTest, ThePrefillIsCutAtThePromptsLastFullBlockWhichSaves) {
  auto s = MakeScheduler(Config(2));
  EngineDriver d(*s);
  // 11 tokens: whole blocks within the first 10 end at 8.
  const ScheduledRequest first = AdmitAlone(d, 1, Prompt(11));
  EXPECT_EQ(first.num_tokens, 8);
  EXPECT_EQ(first.save_snapshot, 1);
  EXPECT_EQ(first.restore_snapshot, 0);
  ASSERT_TRUE(d.Turn());
  const ScheduledRequest* rest = Find(d.step(), 1);
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest->start_position, 8);
  EXPECT_EQ(rest->num_tokens, 3);
  EXPECT_EQ(rest->save_snapshot, 0);
  d.RunToIdle();
  EXPECT_EQ(s->stats().state_snapshots_saved, 1);
}

TEST(StateSnapshotSchedulerTest, ASecondAdmissionOfThePromptRestoresTheSnapshot) {
  auto s = MakeScheduler(Config(2));
  EngineDriver d(*s);
  AdmitAlone(d, 1, Prompt(11));
  d.RunToIdle();
  const ScheduledRequest hit = AdmitAlone(d, 2, Prompt(11));
  EXPECT_EQ(hit.start_position, 8);
  EXPECT_EQ(hit.restore_snapshot, 1);
  EXPECT_EQ(hit.num_tokens, 3);
  EXPECT_EQ(hit.save_snapshot, 0);  // its boundary is cached already
  d.RunToIdle();
  EXPECT_EQ(s->stats().prefix_cache_hit_tokens, 8);
}

TEST(StateSnapshotSchedulerTest, CachedBlocksWithoutASnapshotAtTheirEndRunCold) {
  auto s = MakeScheduler(Config(2));
  EngineDriver d(*s);
  // Request 1 saves at 12 (its last full block); request 2 shares only its first 8 tokens: the
  // blocks ending at 4 and 8 are cached but carry no snapshot, so nothing is reused.
  AdmitAlone(d, 1, Prompt(13));
  d.RunToIdle();
  std::vector<int32_t> other = Prompt(8);
  for (int32_t t : {90, 91, 92, 93, 94}) other.push_back(t);
  const ScheduledRequest cold = AdmitAlone(d, 2, other);
  EXPECT_EQ(cold.start_position, 0);
  EXPECT_EQ(cold.restore_snapshot, 0);
  d.RunToIdle();
  EXPECT_EQ(s->stats().prefix_cache_cold_no_snapshot, 1);
  EXPECT_EQ(s->stats().prefix_cache_hit_tokens, 0);
}

// The second request with a shared system prompt pays for it once more, cut at the end of the
// shared cached blocks where it saves the state; the third one hits there.
TEST(StateSnapshotSchedulerTest, ASharedPrefixGetsASnapshotAtItsEndForTheNextRequest) {
  auto s = MakeScheduler(Config(4));
  EngineDriver d(*s);
  const auto with_question = [](std::vector<int32_t> question) {
    std::vector<int32_t> prompt = Prompt(8);  // the shared "system prompt": two blocks
    prompt.insert(prompt.end(), question.begin(), question.end());
    return prompt;
  };
  AdmitAlone(d, 1, with_question({70, 71, 72, 73, 74}));  // saves at 12 (its last full block)
  d.RunToIdle();
  const ScheduledRequest second = AdmitAlone(d, 2, with_question({80, 81, 82, 83, 84}));
  EXPECT_EQ(second.start_position, 0);   // blocks 0-8 cached, but no state at 8
  EXPECT_EQ(second.num_tokens, 8);       // cut at the shared prefix's end
  EXPECT_GE(second.save_snapshot, 1);
  d.RunToIdle();
  const ScheduledRequest third = AdmitAlone(d, 3, with_question({90, 91, 92, 93, 94}));
  EXPECT_EQ(third.start_position, 8);
  EXPECT_EQ(third.restore_snapshot, second.save_snapshot);
  d.RunToIdle();
}

TEST(StateSnapshotSchedulerTest, TheLeastRecentlyUsedSnapshotIsTakenBackWhenIdsRunOut) {
  auto s = MakeScheduler(Config(1));
  EngineDriver d(*s);
  AdmitAlone(d, 1, Prompt(9));        // snapshot 1 at 8
  d.RunToIdle();
  AdmitAlone(d, 2, Prompt(9, 50));    // another prompt: snapshot 1 again, request 1's is gone
  d.RunToIdle();
  EXPECT_EQ(s->stats().state_snapshots_evicted, 1);
  const ScheduledRequest again = AdmitAlone(d, 3, Prompt(9));
  EXPECT_EQ(again.start_position, 0);  // its blocks are cached, its state is not
  EXPECT_EQ(again.save_snapshot, 1);   // so it saves one again
  d.RunToIdle();
}

}  // namespace
}  // namespace tessera::router
