// Scheduler under seeded random load (arrivals, stops, cancels, preemptions), with the engine's
// one-step-in-flight protocol and a fake worker validating every plan. Per step: budget, prefill
// cap, sequence limit, slots never doubled, block tables exact and unshared, max_tokens never
// exceeded, block accounting. At the end: every request finished, token conservation for each
// one that ended by length or stop, every block back in the pool.
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <set>
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
};

void PrintTo(const RandomCase& c, std::ostream* os) { *os << c.name; }

constexpr int kMaxPrompt = 120;
constexpr int kMaxTokens = 40;

// The scheduler's counters agree with the requests it holds.
void CheckAccounting(const Scheduler& s, EngineDriver& d) {
  int32_t blocks = 0, running = 0, waiting = 0;
  std::set<int32_t> slots;
  for (const auto& [id, sc] : d.scripts()) {
    if (sc.finished) continue;
    const std::optional<RequestSnapshot> r = s.GetRequest(id);
    if (!r.has_value()) {
      ADD_FAILURE() << "request " << id << " vanished";
      continue;
    }
    blocks += r->num_blocks;
    (r->running ? running : waiting) += 1;
    if (r->running) {
      EXPECT_TRUE(slots.insert(r->slot).second) << "slot " << r->slot << " twice";
    }
    EXPECT_LE(r->num_generated + r->num_pending, r->max_tokens);
    EXPECT_LE(r->num_pending, 2);
  }
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.num_blocks_used, blocks);
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

class SchedulerRandomTest : public ::testing::TestWithParam<std::tuple<RandomCase, uint32_t>> {};

TEST_P(SchedulerRandomTest, InvariantsHoldUnderRandomLoad) {
  const auto& [p, seed] = GetParam();
  SchedulerConfig c;
  c.max_num_batched_tokens = p.budget;
  c.max_num_seqs = p.seqs;
  c.block_size = p.block_size;
  c.num_blocks = p.num_blocks;
  c.max_context = kMaxPrompt + kMaxTokens;
  c.max_waiting = 24;
  c.decode_stable = p.decode_stable;
  c.max_prefill_tokens_per_step = p.prefill_cap;
  absl::StatusOr<std::unique_ptr<Scheduler>> made = Scheduler::Create(c);
  ASSERT_TRUE(made.ok()) << made.status();
  Scheduler& s = **made;
  EngineDriver d(s);
  std::mt19937 rng(seed);
  RequestId next_id = 1;
  int num_rejected = 0;
  for (int turn = 0; turn < 3000; ++turn) {
    if (rng() % 3 == 0) {
      const int prompt = 1 + static_cast<int>(rng() % kMaxPrompt);
      const int max_tokens = 1 + static_cast<int>(rng() % kMaxTokens);
      const int stop_after = rng() % 3 == 0 ? 1 + static_cast<int>(rng() % max_tokens) : 0;
      const absl::Status st = d.Add(next_id++, prompt, max_tokens, stop_after);
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
  EXPECT_EQ(st.num_running, 0);
  EXPECT_EQ(st.num_waiting, 0);
  EXPECT_EQ(st.num_preemptions, d.num_preempted());
  EXPECT_GT(finished_naturally, 200);  // the load really ran (every case finishes 240+)
  if (p.expect_preemption) {
    EXPECT_GT(d.num_preempted(), 0);
  }
  if (p.decode_stable) {
    EXPECT_EQ(d.num_mixed_steps(), 0);
  } else {
    EXPECT_GT(d.num_mixed_steps(), 0);
  }
  RecordProperty("steps", static_cast<int>(d.num_steps()));
  RecordProperty("preemptions", static_cast<int>(d.num_preempted()));
  RecordProperty("rejected", num_rejected);
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
};

INSTANTIATE_TEST_SUITE_P(
    Load, SchedulerRandomTest,
    ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Values(1u, 2u, 3u)),
    [](const ::testing::TestParamInfo<SchedulerRandomTest::ParamType>& info) {
      return std::string(std::get<0>(info.param).name) + "_seed" +
             std::to_string(std::get<1>(info.param));
    });

}  // namespace
}  // namespace tessera::router
