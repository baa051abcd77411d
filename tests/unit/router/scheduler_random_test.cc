// Scheduler under seeded random load (arrivals, stops, cancels, preemptions), with the engine's
// one-step-in-flight protocol and a fake worker validating every plan. Per step: budget, prefill
// cap, sequence limit, slots never doubled, block tables exact and unshared, max_tokens never
// exceeded, block accounting. At the end: every request finished, token conservation for each
// one that ended by length or stop, every block back in the pool.
//
// Every case also runs with the prefix cache on: prompts come from three families sharing long
// prefixes (some diverge at a random point), a quarter carry a cache salt. The fake worker then
// also checks that every cached block it is told to read holds the K/V of exactly the reader's
// tokens and salt, written by an earlier plan, and that no plan writes a shared block; the
// accounting checks refcounts against the live tables.
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "router/scheduler.h"
#include "tests/unit/router/scheduler_test_util.h"

namespace tessera::router {
namespace {

using testing::EngineDriver;

struct RandomCase {
  const char* name;
  int32_t budget;
  int32_t seqs;
  int32_t block_size;
  int32_t num_blocks;
  bool decode_stable;
  int32_t prefill_cap;
  bool expect_preemption;
  // Growth reservation (scheduler_admission.cc). 8 < kMaxTokens: long requests still outgrow
  // it and get preempted, short ones backfill. 0 = the policy before issue 15.
  int32_t reserve_horizon = 8;
};

void PrintTo(const RandomCase& c, std::ostream* os) { *os << c.name; }

constexpr int kMaxPrompt = 120;
constexpr int kMaxTokens = 40;

// Three families of prompts with long shared prefixes; a third diverge at a random point.
std::vector<int32_t> RandomPrompt(std::mt19937& rng) {
  const int n = 1 + static_cast<int>(rng() % kMaxPrompt);
  const auto family = static_cast<int32_t>(rng() % 3);
  std::vector<int32_t> prompt(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) prompt[static_cast<size_t>(i)] = family * 5000 + i + 1;
  if (rng() % 3 == 0) {
    for (int i = static_cast<int>(rng() % static_cast<uint32_t>(n)); i < n; ++i) {
      prompt[static_cast<size_t>(i)] = 20000 + static_cast<int32_t>(rng() % 50);
    }
  }
  return prompt;
}

// The scheduler's counters agree with the requests it holds; every block's refcount is the
// number of live tables listing it.
void CheckAccounting(const Scheduler& s, EngineDriver& d) {
  int32_t running = 0, waiting = 0;
  std::map<BlockId, int32_t> refs;
  std::set<int32_t> slots;
  for (const auto& [id, sc] : d.scripts()) {
    if (sc.finished) continue;
    const std::optional<RequestSnapshot> r = s.GetRequest(id);
    if (!r.has_value()) {
      ADD_FAILURE() << "request " << id << " vanished";
      continue;
    }
    for (BlockId b : s.BlockTable(id)) ++refs[b];
    EXPECT_EQ(static_cast<int32_t>(s.BlockTable(id).size()), r->num_blocks);
    (r->running ? running : waiting) += 1;
    if (r->running) {
      EXPECT_TRUE(slots.insert(r->slot).second) << "slot " << r->slot << " twice";
    }
    EXPECT_LE(r->num_generated + r->num_pending, r->max_tokens);
    EXPECT_LE(r->num_pending, 2);
  }
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.num_blocks_used, static_cast<int32_t>(refs.size()));
  for (const auto& [b, n] : refs) EXPECT_EQ(s.blocks().RefCount(b), n) << "block " << b;
  const BlockManager& pool = s.blocks();
  EXPECT_EQ(pool.NumUncachedFree() + pool.NumCachedFree() + pool.NumUsed(), pool.NumTotal());
  EXPECT_EQ(st.num_blocks_cached_free, pool.NumCachedFree());
  if (!s.config().enable_prefix_cache) {
    EXPECT_EQ(pool.NumCachedFree(), 0);
  }
  EXPECT_EQ(st.num_running, running);
  EXPECT_EQ(st.num_waiting, waiting);
  EXPECT_LE(st.num_running, s.config().max_num_seqs);
}

void CancelRandom(EngineDriver& d, std::mt19937& rng) {
  std::vector<RequestId> live;
  for (const auto& [id, sc] : d.scripts()) {
    if (!sc.finished) live.push_back(id);
  }
  if (!live.empty()) d.Cancel(live[rng() % live.size()]);
}

// kTinyHash keeps 3 bits of every hash: nearly every lookup meets colliding blocks, so only the
// exact content confirmation keeps hits correct.
// kSnapshots: a hybrid model's cache, 3 state snapshots (so they are evicted all the time): every
// hit must end at a block whose snapshot holds exactly its tokens' state (FakeWorker checks).
enum class CacheMode { kOff, kOn, kTinyHash, kSnapshots };

class SchedulerRandomTest
    : public ::testing::TestWithParam<std::tuple<RandomCase, uint32_t, CacheMode>> {};

TEST_P(SchedulerRandomTest, InvariantsHoldUnderRandomLoad) {
  const auto& [p, seed, mode] = GetParam();
  const bool prefix_cache = mode != CacheMode::kOff;
  SchedulerConfig c;
  c.max_num_batched_tokens = p.budget;
  c.max_num_seqs = p.seqs;
  c.block_size = p.block_size;
  c.num_blocks = p.num_blocks;
  c.max_context = kMaxPrompt + kMaxTokens;
  c.max_waiting = 24;
  c.decode_stable = p.decode_stable;
  c.max_prefill_tokens_per_step = p.prefill_cap;
  c.enable_prefix_cache = prefix_cache;
  c.reserve_horizon_tokens = p.reserve_horizon;
  if (mode == CacheMode::kTinyHash) c.prefix_cache_hash_bits = 3;
  if (mode == CacheMode::kSnapshots) c.state_snapshot_slots = 3;
  absl::StatusOr<std::unique_ptr<Scheduler>> made = Scheduler::Create(c);
  ASSERT_TRUE(made.ok()) << made.status();
  Scheduler& s = **made;
  EngineDriver d(s);
  std::mt19937 rng(seed);
  RequestId next_id = 1;
  int num_rejected = 0;
  for (int turn = 0; turn < 3000; ++turn) {
    if (rng() % 3 == 0) {
      const std::vector<int32_t> prompt = RandomPrompt(rng);
      const int max_tokens = 1 + static_cast<int>(rng() % kMaxTokens);
      const int stop_after = rng() % 3 == 0 ? 1 + static_cast<int>(rng() % max_tokens) : 0;
      const std::string salt = rng() % 4 == 0 ? "tenant-a" : "";
      const absl::Status st = d.Add(next_id++, prompt, max_tokens, stop_after, salt);
      if (!st.ok()) {
        ASSERT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
        ++num_rejected;
      }
    }
    if (rng() % 40 == 0) CancelRandom(d, rng);
    d.Turn();
    CheckAccounting(s, d);
    if (::testing::Test::HasFailure()) return;  // one broken step is enough to read
  }
  d.RunToIdle();
  EXPECT_EQ(d.num_in_flight(), 0u);

  int finished_naturally = 0;
  for (const auto& [id, sc] : d.scripts()) {
    ASSERT_TRUE(sc.finished) << "request " << id << " never finished";
    if (sc.reason == FinishReason::kCancelled) continue;
    ++finished_naturally;
    EXPECT_EQ(sc.tokens_this_admission, sc.num_prompt + sc.generated - 1 + sc.wasted) << id;
    EXPECT_LE(sc.wasted, 1) << id;
    if (sc.reason == FinishReason::kLength) {
      EXPECT_EQ(sc.generated, sc.max_tokens) << id;
    }
  }
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.num_blocks_used, 0);
  // Every block is back: never-hashed free blocks plus cached free ones make the whole pool.
  EXPECT_EQ(s.blocks().NumUncachedFree() + s.blocks().NumCachedFree(), s.blocks().NumTotal());
  if (prefix_cache) {
    EXPECT_GT(st.prefix_cache_hit_tokens, 0);
    EXPECT_GT(d.worker().num_cached_blocks_read(), 0);
    EXPECT_LE(st.prefix_cache_hit_tokens, st.prefix_cache_query_tokens);
    int64_t cached = 0;
    for (const auto& [id, sc] : d.scripts()) cached += sc.cached_tokens;
    EXPECT_EQ(cached, st.prefix_cache_hit_tokens);
    if (mode == CacheMode::kSnapshots) {
      EXPECT_GT(d.worker().num_snapshots_restored(), 0);
      EXPECT_GT(st.state_snapshots_saved, 0);
      EXPECT_LE(s.blocks().snapshots().num_attached(), 3);
    }
  } else {
    EXPECT_EQ(st.prefix_cache_query_tokens, 0);
    EXPECT_EQ(d.worker().num_cached_blocks_read(), 0);
  }
  EXPECT_EQ(st.num_running, 0);
  EXPECT_EQ(st.num_waiting, 0);
  EXPECT_EQ(st.num_preemptions, d.num_preempted());
  // A victim without progress is the fallback only, and the scheduler counts each one.
  EXPECT_EQ(st.num_preemptions_without_progress, d.num_preempted_without_progress());
  EXPECT_GT(finished_naturally, 200);  // the load really ran (every case finishes 240+)
  if (p.expect_preemption) {
    EXPECT_GT(d.num_preempted(), 0);
  } else if (p.reserve_horizon >= kMaxTokens) {
    EXPECT_EQ(d.num_preempted(), 0);
  }
  if (p.decode_stable) {
    EXPECT_EQ(d.num_mixed_steps(), 0);
  } else {
    EXPECT_GT(d.num_mixed_steps(), 0);
  }
  RecordProperty("steps", static_cast<int>(d.num_steps()));
  RecordProperty("preemptions", static_cast<int>(d.num_preempted()));
  RecordProperty("rejected", num_rejected);
  RecordProperty("cached_tokens", static_cast<int>(st.prefix_cache_hit_tokens));
}

// Every case's pool holds the largest request alone (prompt 120 + 40 - 1 positions).
const RandomCase kCases[] = {
    {"tight_pool", 64, 8, 4, 64, false, 0, true},
    {"tight_pool_block16", 256, 16, 16, 12, false, 0, true},
    {"block_size_1", 32, 4, 1, 200, false, 0, true},
    {"decode_stable", 64, 8, 4, 64, true, 0, true},
    {"prefill_cap", 128, 8, 4, 80, false, 24, true},
    {"both_policies", 96, 8, 4, 64, true, 16, true},
    {"roomy", 2048, 32, 16, 1000, false, 0, false},
    {"tight_pool_no_reservation", 64, 8, 4, 64, false, 0, true, 0},
    // The default horizon (64) covers every request's whole output here: nobody is preempted.
    {"tight_pool_full_reservation", 64, 8, 4, 64, false, 0, false, 64},
    {"tight_pool_block16_no_reservation", 256, 16, 16, 12, false, 0, true, 0},
};

INSTANTIATE_TEST_SUITE_P(
    Load, SchedulerRandomTest,
    ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Values(1u, 2u, 3u),
                       ::testing::Values(CacheMode::kOff, CacheMode::kOn,
                                         CacheMode::kTinyHash, CacheMode::kSnapshots)),
    [](const ::testing::TestParamInfo<SchedulerRandomTest::ParamType>& info) {
      return std::string(std::get<0>(info.param).name) + "_seed" +
             std::to_string(std::get<1>(info.param)) +
             (std::get<2>(info.param) == CacheMode::kOn          ? "_prefix_cache"
              : std::get<2>(info.param) == CacheMode::kTinyHash  ? "_prefix_cache_3bit_hash"
              : std::get<2>(info.param) == CacheMode::kSnapshots ? "_state_snapshots"
                                                                 : "");
    });

}  // namespace
}  // namespace tessera::router
