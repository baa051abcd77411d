// The scheduler with the prefix cache on: what admission finds (full-hit rule, hash chain, salts,
// eviction), when blocks become findable (never in the step that computes them; generated
// tokens too), preemption recompute through the cache, stats. Exact block ids throughout.
// Block size 4 everywhere.
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
using testing::GeneratedToken;
using testing::Ids;
using testing::Prompt;
using testing::MakeScheduler;

SchedulerConfig Config(int num_blocks, int budget = 100) {
  SchedulerConfig c = testing::BasePolicyConfig(budget, 4, 4, num_blocks);
  c.enable_prefix_cache = true;
  return c;
}

// Concatenation helper: Cat(Prompt(8), {9, 9}).
std::vector<int32_t> Cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs request `id` alone through the driver to its end (max_tokens 1: prefill only).
void RunAlone(EngineDriver& d, RequestId id, const std::vector<int32_t>& prompt,
              std::string_view salt = {}) {
  ASSERT_TRUE(d.Add(id, prompt, 1, 0, salt).ok());
  d.RunToIdle();
}

// The is_new entry of `id` in the driver's last step.
const ScheduledRequest& Admitted(const EngineDriver& d, RequestId id) {
  const ScheduledRequest* r = Find(d.step(), id);
  EXPECT_NE(r, nullptr);
  EXPECT_TRUE(r->is_new);
  return *r;
}

// A prompt of exactly 3 blocks: the first 2 come from the cache, the last block is recomputed
// (the worker needs the last token's logits and never writes a shared block).
TEST(PrefixCacheSchedulerTest, FullHitStillRecomputesTheLastBlock) {
  auto s = MakeScheduler(Config(16));
  EngineDriver d(*s);
  RunAlone(d, 1, Prompt(12));  // blocks 1, 2, 3, all registered
  ASSERT_TRUE(d.Add(2, Prompt(12), 1).ok());
  ASSERT_TRUE(d.Turn());
  const ScheduledRequest& r = Admitted(d, 2);
  EXPECT_EQ(r.start_position, 8);
  EXPECT_EQ(r.num_tokens, 4);
  EXPECT_EQ(r.num_known_tokens, 12);
  EXPECT_TRUE(r.samples);
  // Cached blocks first; the fresh one comes off the never-hashed free stack, not the LRU.
  EXPECT_THAT(Ids(d.step(), r), ElementsAre(1, 2, 4));
  EXPECT_EQ(s->GetRequest(2)->num_cached_tokens, 8);
  EXPECT_EQ(s->stats().prefix_cache_query_tokens, 12 + 12);
  EXPECT_EQ(s->stats().prefix_cache_hit_tokens, 8);
  d.RunToIdle();
  // A 13-token prompt reaches the third block.
  ASSERT_TRUE(d.Add(3, Cat(Prompt(12), {77}), 1).ok());
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 3).start_position, 12);
  EXPECT_EQ(Admitted(d, 3).num_tokens, 1);
  EXPECT_THAT(Ids(d.step(), Admitted(d, 3)), ElementsAre(1, 2, 3, 4));
}

// A running request's full blocks are shared at once (refcount 2) with a later request that has
// the same prefix; both keep running, nobody writes the shared blocks (the FakeWorker checks).
TEST(PrefixCacheSchedulerTest, RunningRequestsShareFullBlocks) {
  auto s = MakeScheduler(Config(16));
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, Prompt(10), 6).ok());
  ASSERT_TRUE(d.Turn());  // prompt computed: blocks 1, 2 full, 3 partial
  ASSERT_TRUE(d.Add(2, Cat(Prompt(9), {50, 51, 52}), 6).ok());
  ASSERT_TRUE(d.Turn());
  const ScheduledRequest& r = Admitted(d, 2);
  EXPECT_EQ(r.start_position, 8);
  EXPECT_THAT(Ids(d.step(), r), ElementsAre(1, 2, 4));
  EXPECT_EQ(s->blocks().RefCount(1), 2);
  EXPECT_EQ(s->blocks().RefCount(2), 2);
  EXPECT_EQ(s->blocks().RefCount(3), 1);
  EXPECT_EQ(s->stats().num_blocks_used, 4);  // distinct blocks, not table entries
  d.RunToIdle();
  EXPECT_EQ(s->stats().num_blocks_used, 0);
  EXPECT_EQ(s->blocks().NumUncachedFree() + s->blocks().NumCachedFree(), 15);
}

// Two requests with the same prompt admitted in one step both compute it: a block becomes
// findable only after the step that computes it. The next one hits the copy indexed first.
TEST(PrefixCacheSchedulerTest, NoHitOnBlocksComputedInTheSameStep) {
  auto s = MakeScheduler(Config(32));
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, Prompt(9), 3).ok());
  ASSERT_TRUE(d.Add(2, Prompt(9), 3).ok());
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 1).start_position, 0);
  EXPECT_EQ(Admitted(d, 2).start_position, 0);
  EXPECT_THAT(Ids(d.step(), Admitted(d, 2)), ElementsAre(4, 5, 6));
  ASSERT_TRUE(d.Add(3, Prompt(9), 3).ok());
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 3).start_position, 8);
  EXPECT_THAT(Ids(d.step(), Admitted(d, 3)), ElementsAre(1, 2, 7));
  d.RunToIdle();
}

// The chain: a block matches only under the same parent blocks. Request 2's third block has
// request 1's tokens, but its second block differs: only its first block hits. Once request 2's
// own chain is cached, request 3 (same as 2 but the last token) follows it to the end.
TEST(PrefixCacheSchedulerTest, SameTokensUnderAnotherParentMiss) {
  auto s = MakeScheduler(Config(32));
  EngineDriver d(*s);
  RunAlone(d, 1, Prompt(13));  // blocks [1..4] [5..8] [9..12]: ids 1, 2, 3
  const std::vector<int32_t> other_middle = Cat(Cat(Prompt(4), {0, 0, 0, 0}), Prompt(4, 9));
  ASSERT_TRUE(d.Add(2, Cat(other_middle, {13}), 1).ok());
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 2).start_position, 4);
  EXPECT_THAT(Ids(d.step(), Admitted(d, 2)), ElementsAre(1, 4, 5, 6));
  d.RunToIdle();
  ASSERT_TRUE(d.Add(3, Cat(other_middle, {99}), 1).ok());
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 3).start_position, 12);
  EXPECT_THAT(Ids(d.step(), Admitted(d, 3)), ElementsAre(1, 4, 5, 6));
  d.RunToIdle();
}

TEST(PrefixCacheSchedulerTest, SaltsIsolateNamespaces) {
  auto s = MakeScheduler(Config(64));
  EngineDriver d(*s);
  RunAlone(d, 1, Prompt(9), "tenant-a");
  ASSERT_TRUE(d.Add(2, Prompt(9), 1).ok());  // default namespace: miss
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 2).start_position, 0);
  d.RunToIdle();
  ASSERT_TRUE(d.Add(3, Prompt(9), 1, 0, "tenant-b").ok());  // other tenant: miss
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 3).start_position, 0);
  d.RunToIdle();
  ASSERT_TRUE(d.Add(4, Prompt(9), 1, 0, "tenant-a").ok());  // same tenant: hit
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 4).start_position, 8);
  EXPECT_THAT(Ids(d.step(), Admitted(d, 4)), ElementsAre(1, 2, 7));
  ASSERT_TRUE(d.Add(5, Prompt(9), 1).ok());  // default namespace: request 2's blocks
  d.RunToIdle();
  EXPECT_EQ(d.scripts()[5].cached_tokens, 8);
}

// Tiny pool: freed cached blocks are evicted least recently freed first (a table's tail first),
// after the never-hashed ones; an evicted block is gone from the index, so the next lookup of
// that prefix stops before it.
TEST(PrefixCacheSchedulerTest, EvictionOrderAndEvictedBlocksMiss) {
  auto s = MakeScheduler(Config(6));  // 5 usable blocks
  EngineDriver d(*s);
  RunAlone(d, 1, Prompt(13));  // ids 1 2 3 4; blocks 1-3 cached; LRU after free: 3, 2, 1
  EXPECT_EQ(s->stats().num_blocks_cached_free, 3);
  EXPECT_EQ(s->blocks().NumUncachedFree(), 2);
  // An unrelated 9-token prompt needs 3 blocks: 4 and 5 (never hashed), then evicts 3.
  RunAlone(d, 2, std::vector<int32_t>(9, 500));
  EXPECT_THAT(d.admissions().back(), ElementsAre(2));
  // Its blocks 4, 5 were registered (its [500 x 4] chain) and freed after 1, 2: LRU 2, 1, 5, 4;
  // the evicted 3 went back to the free stack.
  ASSERT_TRUE(d.Add(3, Prompt(13), 1).ok());
  ASSERT_TRUE(d.Turn());
  const ScheduledRequest& r = Admitted(d, 3);
  EXPECT_EQ(r.start_position, 8);  // blocks 1, 2 still cached; 3 was evicted: a miss
  EXPECT_EQ(r.num_tokens, 5);
  // Fresh blocks: 3 off the free stack, then 5 evicted (the oldest cached block left).
  EXPECT_THAT(Ids(d.step(), r), ElementsAre(1, 2, 3, 5));
  d.RunToIdle();
}

// A hit takes its blocks out of the LRU: under pressure the allocator evicts other cached
// blocks, never the ones just reused.
TEST(PrefixCacheSchedulerTest, HitBlocksLeaveTheLru) {
  auto s = MakeScheduler(Config(7));  // 6 usable blocks
  EngineDriver d(*s);
  RunAlone(d, 1, Prompt(9));                       // ids 1 2 3; cached 1 2; LRU: 2, 1
  RunAlone(d, 2, std::vector<int32_t>(9, 500));    // ids 3 4 5 (3 reused from the stack)
  // LRU now: 2, 1, then request 2's full blocks (freed tail first): 4, 3. Free stack: 5, 6.
  EXPECT_EQ(s->stats().num_blocks_cached_free, 4);
  ASSERT_TRUE(d.Add(3, Cat(Prompt(8), {1, 2, 3, 4, 5, 6, 7, 8, 9}), 1).ok());
  ASSERT_TRUE(d.Turn());
  // Hits 1, 2 (the oldest in the LRU); needs 3 more: 5, 6 off the stack, then evicts 4 (the
  // oldest left), not 2 or 1.
  EXPECT_THAT(Ids(d.step(), Admitted(d, 3)), ElementsAre(1, 2, 5, 6, 4));
  EXPECT_EQ(Admitted(d, 3).start_position, 8);
  d.RunToIdle();
}

// Blocks filled by generated tokens are hashed too (once their token arrived), so a follow-up
// turn that repeats prompt + answer finds them.
TEST(PrefixCacheSchedulerTest, GeneratedTokensAreCachedToo) {
  auto s = MakeScheduler(Config(32));
  EngineDriver d(*s);
  ASSERT_TRUE(d.Add(1, Prompt(6), 7).ok());  // known at the end: 6 + 7 = 13, computed 12
  d.RunToIdle();
  std::vector<int32_t> follow_up = Prompt(6);
  for (int32_t g = 0; g < 7; ++g) follow_up.push_back(GeneratedToken(g));
  follow_up.push_back(42);  // the next user turn
  ASSERT_TRUE(d.Add(2, follow_up, 1).ok());
  ASSERT_TRUE(d.Turn());
  // Positions 0-11 were computed and their tokens known: blocks 1, 2, 3.
  EXPECT_EQ(Admitted(d, 2).start_position, 12);
  EXPECT_THAT(Ids(d.step(), Admitted(d, 2)), ElementsAre(1, 2, 3, 4));
  d.RunToIdle();
}

// A preempted request's full blocks stay cached: re-admitted, it recomputes only what was
// evicted or not full (here: one token), and its new table starts with its own old blocks.
TEST(PrefixCacheSchedulerTest, PreemptedRequestRecomputesThroughTheCache) {
  auto s = MakeScheduler(Config(5, 64));  // 4 usable blocks
  ASSERT_TRUE(s->AddRequest(1, Prompt(7), 3).ok());
  ASSERT_TRUE(s->AddRequest(2, std::vector<int32_t>{9, 9, 9, 9, 9, 9, 9}, 3).ok());
  ScheduledStep step;
  s->Schedule(&step);  // plan 1: A 1 2, B 3 4
  s->Schedule(&step);  // plan 2: both decode at position 7
  ASSERT_TRUE(s->OnTokenSampled(1, 100).ok());
  ASSERT_TRUE(s->OnTokenSampled(2, 200).ok());
  s->Schedule(&step);  // plan 3: A needs a block -> B preempted; B's blocks 3, 4 are full
  EXPECT_THAT(step.preempted, ElementsAre(2));
  EXPECT_THAT(Ids(step, *Find(step, 1)), ElementsAre(4));  // B's tail block (oldest) evicted
  EXPECT_EQ(s->stats().num_blocks_cached_free, 1);         // block 3 = B's [9 9 9 9]
  ASSERT_TRUE(s->OnTokenSampled(1, 101).ok());
  ASSERT_TRUE(s->OnTokenSampled(2, 201).ok());
  s->Schedule(&step);  // A awaits its last token; B needs 3 - 1 cached blocks, none free
  EXPECT_TRUE(step.empty());
  EXPECT_EQ(*s->OnTokenSampled(1, 102), SampleOutcome::kFinishedLength);
  s->Schedule(&step);  // B re-admitted: its block 3 from the cache
  const ScheduledRequest& rb = *Find(step, 2);
  EXPECT_TRUE(rb.is_new);
  EXPECT_EQ(rb.start_position, 4);
  EXPECT_EQ(rb.num_tokens, 5);
  EXPECT_EQ(rb.num_known_tokens, 9);
  // Block 3 from the cache; 4 (A's partial block) off the free stack; 2 evicted from the LRU.
  EXPECT_THAT(Ids(step, rb), ElementsAre(3, 4, 2));
  EXPECT_EQ(s->GetRequest(2)->num_cached_tokens, 4);
  EXPECT_EQ(s->stats().prefix_cache_hit_tokens, 4);
}

TEST(PrefixCacheSchedulerTest, DisabledCacheNeverHits) {
  SchedulerConfig c = Config(32);
  c.enable_prefix_cache = false;
  auto s = MakeScheduler(c);
  EngineDriver d(*s);
  RunAlone(d, 1, Prompt(12));
  ASSERT_TRUE(d.Add(2, Prompt(12), 1).ok());
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 2).start_position, 0);
  EXPECT_THAT(Ids(d.step(), Admitted(d, 2)), ElementsAre(1, 2, 3));  // the free stack, as before
  EXPECT_EQ(s->stats().prefix_cache_query_tokens, 0);
  EXPECT_EQ(s->stats().num_blocks_cached_free, 0);
  d.RunToIdle();
}

// A reconnect (Reconfigure) starts with an empty cache: the new worker's pool holds nothing.
// A request waiting across it keeps its salt.
TEST(PrefixCacheSchedulerTest, ReconfigureEmptiesTheCache) {
  auto s = MakeScheduler(Config(32));
  {
    EngineDriver old_worker(*s);
    RunAlone(old_worker, 1, Prompt(9), "tenant-a");
  }
  EngineDriver d(*s);  // the new worker's view: it holds no K/V at all
  ASSERT_TRUE(d.Add(2, Prompt(9), 1, 0, "tenant-a").ok());
  ASSERT_TRUE(s->Reconfigure(Config(32)).ok());
  EXPECT_EQ(s->stats().num_blocks_cached_free, 0);
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 2).start_position, 0);
  d.RunToIdle();
  ASSERT_TRUE(d.Add(3, Prompt(9), 1, 0, "tenant-a").ok());
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 3).start_position, 8);  // request 2's blocks, same tenant
  d.RunToIdle();
  ASSERT_TRUE(d.Add(4, Prompt(9), 1).ok());
  ASSERT_TRUE(d.Turn());
  EXPECT_EQ(Admitted(d, 4).start_position, 0);
  d.RunToIdle();
}

TEST(PrefixCacheSchedulerTest, HashBitsAreValidated) {
  SchedulerConfig c = Config(8);
  c.prefix_cache_hash_bits = 0;
  EXPECT_EQ(Scheduler::Create(c).status().code(), absl::StatusCode::kInvalidArgument);
  c.prefix_cache_hash_bits = 65;
  EXPECT_EQ(Scheduler::Create(c).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::router
