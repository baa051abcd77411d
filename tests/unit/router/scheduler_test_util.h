// Test harness for the scheduler: a FakeWorker that validates every plan the way the worker
// will (slots, block tables, positions), and an EngineDriver that plays the engine's side of
// the one-step-in-flight protocol (results of plan N are delivered before Schedule() for N+2).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "router/scheduler.h"

namespace tessera::router::testing {

// A config for the exact-number tests of the base policy. The prefix cache is off:
// prefix_cache_scheduler_test.cc pins what the cache changes (hits, allocation order), and the
// random test runs both ways. So is the growth reservation (admission checks only the chunk's
// blocks, strictly FCFS): scheduler_fairness_test.cc pins what it changes, the random test runs
// both ways.
inline SchedulerConfig BasePolicyConfig(int budget, int seqs, int block_size, int num_blocks) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = seqs;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.max_context = 1 << 20;
  c.enable_prefix_cache = false;
  c.max_waiting = 64;
  c.reserve_horizon_tokens = 0;
  return c;
}

inline std::unique_ptr<Scheduler> MakeScheduler(const SchedulerConfig& c) {
  absl::StatusOr<std::unique_ptr<Scheduler>> s = Scheduler::Create(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

inline std::vector<int32_t> Prompt(int n, int32_t first = 1) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = first + i;
  return p;
}

inline std::vector<BlockId> Ids(const ScheduledStep& step, const ScheduledRequest& r) {
  const auto span = step.NewBlocks(r);
  return std::vector<BlockId>(span.begin(), span.end());
}

inline const ScheduledRequest* Find(const ScheduledStep& step, RequestId id) {
  for (const ScheduledRequest& r : step.requests) {
    if (r.request_id == id) return &r;
  }
  return nullptr;
}

// The token the fake engine delivers as generated token number `g` (0-based) of any request;
// FakeWorker models the worker's sampler with the same rule, so it knows the token id at every
// position, including decodes of tokens it sampled itself.
inline int32_t GeneratedToken(int32_t g) { return 1000 + g; }

// The worker's view: per slot, the request, its block table and computed positions; per block,
// which tables hold it (as cached or not) and the token context its K/V was computed from.
class FakeWorker {
 public:
  explicit FakeWorker(const Scheduler& scheduler)
      : scheduler_(scheduler),
        config_(scheduler.config()),
        slots_(static_cast<size_t>(config_.max_num_seqs)),
        blocks_(static_cast<size_t>(config_.num_blocks)) {}

  // Applies drops, then entries, checking what the worker's plan validation checks plus the
  // scheduler's step invariants (budget, sequence limit, exact block needs). Blocks: a cached
  // prefix block may sit in several tables, but must hold exactly the K/V of the reader's
  // tokens (written by an earlier plan); a block written by this plan must be in its writer's
  // table alone and in nobody's cached prefix.
  void Apply(const ScheduledStep& step) {
    for (int32_t slot : step.dropped_slots) Drop(slot);
    EXPECT_LE(static_cast<int>(step.requests.size()), config_.max_num_seqs);
    int32_t tokens = 0, prefill = 0;
    std::set<int32_t> seen;
    for (const ScheduledRequest& r : step.requests) {
      EXPECT_TRUE(seen.insert(r.slot).second) << "slot " << r.slot << " twice in one step";
      Admit(step, r);
      tokens += r.num_tokens;
      if (r.is_prefill) prefill += r.num_tokens;
    }
    if (::testing::Test::HasFatalFailure()) return;
    for (const ScheduledRequest& r : step.requests) Write(r);
    EXPECT_EQ(tokens, step.num_batched_tokens);
    EXPECT_EQ(prefill, step.num_prefill_tokens);
    EXPECT_LE(tokens, config_.max_num_batched_tokens) << "token budget exceeded";
    if (config_.max_prefill_tokens_per_step > 0) {
      EXPECT_LE(prefill, config_.max_prefill_tokens_per_step) << "prefill cap exceeded";
    }
  }

  int64_t num_cached_blocks_read() const { return num_cached_blocks_read_; }
  int64_t num_snapshots_restored() const { return num_snapshots_restored_; }
  // The cache salt of request `id`: a cached block must come from a writer with the same salt.
  void SetSalt(RequestId id, std::string_view salt) { salts_[id] = std::string(salt); }

 private:
  struct Slot {
    bool live = false;
    RequestId id = 0;
    int32_t computed = 0;
    int32_t num_prompt = 0;
    int32_t num_cached_blocks = 0;
    std::vector<int32_t> given;  // known tokens at admission
    std::vector<BlockId> table;
    std::string salt;
  };
  struct Block {
    int32_t refs = 0;         // live tables listing it
    int32_t cached_refs = 0;  // of them, as a cached (read-only) prefix block
    std::vector<int32_t> context;  // tokens [0, last position written into it]
    std::string salt;              // its writer's cache salt
  };

  struct Snapshot {
    std::vector<int32_t> context;  // the tokens whose state it holds
    std::string salt;
  };

  Block& B(BlockId b) { return blocks_[static_cast<size_t>(b)]; }

  int32_t TokenAt(const Slot& s, int32_t position) const {
    if (position < static_cast<int32_t>(s.given.size())) {
      return s.given[static_cast<size_t>(position)];
    }
    return GeneratedToken(position - s.num_prompt);
  }

  void Drop(int32_t slot) {
    ASSERT_TRUE(slot >= 0 && slot < config_.max_num_seqs) << "dropped slot " << slot;
    Slot& s = slots_[static_cast<size_t>(slot)];
    EXPECT_TRUE(s.live) << "dropping slot " << slot << " that holds no request";
    for (size_t i = 0; i < s.table.size(); ++i) {
      Block& b = B(s.table[i]);
      --b.refs;
      if (static_cast<int32_t>(i) < s.num_cached_blocks) --b.cached_refs;
      EXPECT_GE(b.refs, 0);
      EXPECT_GE(b.cached_refs, 0);
    }
    s = Slot{};
  }

  void Admit(const ScheduledStep& step, const ScheduledRequest& r) {
    ASSERT_TRUE(r.slot >= 0 && r.slot < config_.max_num_seqs) << "slot " << r.slot;
    Slot& s = slots_[static_cast<size_t>(r.slot)];
    EXPECT_GE(r.num_tokens, 1);
    if (r.is_new) {
      EXPECT_FALSE(s.live) << "new request " << r.request_id << " in live slot " << r.slot;
      EXPECT_EQ(r.start_position % config_.block_size, 0) << "cached tokens, request "
                                                          << r.request_id;
      EXPECT_LT(r.start_position, r.num_known_tokens) << "a full hit must recompute a token";
      EXPECT_TRUE(r.is_prefill);
      EXPECT_GE(r.num_known_tokens, r.start_position + r.num_tokens);
      EXPECT_GE(r.num_known_tokens, r.num_prompt_tokens);
      const std::span<const int32_t> known = scheduler_.Tokens(r.request_id);
      ASSERT_GE(known.size(), static_cast<size_t>(r.num_known_tokens));
      s = Slot{true, r.request_id, r.start_position, r.num_prompt_tokens,
               r.start_position / config_.block_size,
               std::vector<int32_t>(known.begin(), known.begin() + r.num_known_tokens), {},
               salts_.contains(r.request_id) ? salts_.at(r.request_id) : std::string()};
      CheckRestore(s, r);
    } else {
      EXPECT_TRUE(s.live && s.id == r.request_id)
          << "request " << r.request_id << " continues in slot " << r.slot << " it does not hold";
    }
    EXPECT_EQ(r.start_position, s.computed) << "request " << r.request_id;
    for (BlockId b : step.NewBlocks(r)) {
      ASSERT_TRUE(b > 0 && b < config_.num_blocks) << "block id " << b;
      const auto logical = static_cast<int32_t>(s.table.size());
      Block& block = B(b);
      if (logical < s.num_cached_blocks) {
        CheckCachedContent(s, logical, b);
        ++block.cached_refs;
        ++num_cached_blocks_read_;
      } else {
        EXPECT_EQ(block.refs, 0) << "block " << b << " in two live tables";
        block.context.clear();  // a fresh owner overwrites it
      }
      ++block.refs;
      s.table.push_back(b);
    }
    // Exactly the blocks needed to hold every computed position: no more, no less.
    EXPECT_EQ(static_cast<int32_t>(s.table.size()),
              BlockManager::BlocksFor(s.computed + r.num_tokens, config_.block_size))
        << "request " << r.request_id;
  }

  // Hybrid models: a cached prefix comes with the state snapshot taken after exactly its tokens
  // (saved by an earlier plan); nothing else restores one.
  void CheckRestore(const Slot& s, const ScheduledRequest& r) {
    if (config_.state_snapshot_slots == 0 || !config_.enable_prefix_cache) {
      EXPECT_EQ(r.restore_snapshot, 0) << "request " << r.request_id;
      return;
    }
    if (r.start_position == 0) {
      EXPECT_EQ(r.restore_snapshot, 0) << "request " << r.request_id << " restores a cold start";
      return;
    }
    ASSERT_GE(r.restore_snapshot, 1) << "request " << r.request_id << " has cached tokens but "
                                     << "no state snapshot";
    ASSERT_LE(r.restore_snapshot, config_.state_snapshot_slots);
    ASSERT_TRUE(snapshots_.contains(r.restore_snapshot)) << "snapshot never saved";
    const Snapshot& snapshot = snapshots_.at(r.restore_snapshot);
    const std::vector<int32_t> expected(s.given.begin(), s.given.begin() + r.start_position);
    EXPECT_EQ(snapshot.context, expected) << "snapshot " << r.restore_snapshot << " of request "
                                          << r.request_id << " holds another prefix's state";
    EXPECT_EQ(snapshot.salt, s.salt) << "snapshot crosses cache salts";
    ++num_snapshots_restored_;
  }

  // A cached block holds the K/V of exactly the reader's tokens up to its end, computed before.
  void CheckCachedContent(const Slot& s, int32_t logical, BlockId b) {
    const auto end = static_cast<size_t>((logical + 1) * config_.block_size);
    const std::vector<int32_t> expected(s.given.begin(), s.given.begin() + end);
    EXPECT_EQ(B(b).context, expected) << "cached block " << b << " (logical " << logical
                                      << ") of request " << s.id << " holds other tokens";
    EXPECT_EQ(B(b).salt, s.salt) << "cached block " << b << " crosses cache salts";
  }

  void Write(const ScheduledRequest& r) {
    Slot& s = slots_[static_cast<size_t>(r.slot)];
    const int32_t begin = s.computed;
    const int32_t end = begin + r.num_tokens;
    const int32_t bs = config_.block_size;
    for (int32_t logical = begin / bs; logical <= (end - 1) / bs; ++logical) {
      const BlockId b = s.table[static_cast<size_t>(logical)];
      Block& block = B(b);
      EXPECT_EQ(block.cached_refs, 0) << "request " << r.request_id << " writes block " << b
                                      << " that a live sequence holds as cached";
      EXPECT_EQ(block.refs, 1) << "request " << r.request_id << " writes shared block " << b;
      const int32_t last = std::min(end, (logical + 1) * bs);
      block.context.clear();
      for (int32_t p = 0; p < last; ++p) block.context.push_back(TokenAt(s, p));
      block.salt = s.salt;
    }
    s.computed = end;
    if (r.save_snapshot != 0) {
      ASSERT_GE(r.save_snapshot, 1);
      ASSERT_LE(r.save_snapshot, config_.state_snapshot_slots);
      EXPECT_EQ(end % bs, 0) << "a state snapshot off a block boundary";
      Snapshot& snapshot = snapshots_[r.save_snapshot];
      snapshot.context.clear();
      for (int32_t p = 0; p < end; ++p) snapshot.context.push_back(TokenAt(s, p));
      snapshot.salt = s.salt;
    }
  }

  const Scheduler& scheduler_;
  SchedulerConfig config_;
  std::vector<Slot> slots_;
  std::vector<Block> blocks_;  // [num_blocks]
  int64_t num_cached_blocks_read_ = 0;
  int64_t num_snapshots_restored_ = 0;
  std::map<int32_t, Snapshot> snapshots_;  // by id, as the last plan saved it
  std::map<RequestId, std::string> salts_;
};

// Per-request script and record of what happened to it.
struct Scripted {
  int32_t num_prompt = 0;
  int32_t max_tokens = 0;
  int32_t stop_after = 0;  // > 0: the engine sees a stop in generated token #stop_after
  // Scheduled tokens since the latest admission (is_new resets it).
  int64_t tokens_this_admission = 0;
  int32_t num_samples_this_admission = 0;
  int32_t generated = 0;
  bool finished = false;
  FinishReason reason = FinishReason::kError;
  int32_t wasted = 0;  // scheduled decodes whose result arrived after the finish
  int64_t cached_tokens = 0;  // start positions of its admissions (prefix-cache hits)
  int32_t num_preemptions = 0;
  int64_t admitted_at_step = -1;  // driver step of its first admission
  int64_t first_sample_step = -1;  // driver step of the first plan that sampled it
};

// Plays the engine: at most two plans unanswered, results delivered in order.
class EngineDriver {
 public:
  EngineDriver(Scheduler& scheduler) : s_(scheduler), worker_(scheduler) {}

  absl::Status Add(RequestId id, int prompt, int max_tokens, int stop_after = 0) {
    return Add(id, Prompt(prompt), max_tokens, stop_after);
  }
  absl::Status Add(RequestId id, const std::vector<int32_t>& prompt, int max_tokens,
                   int stop_after = 0, std::string_view cache_salt = {}) {
    absl::Status st = s_.AddRequest(id, prompt, max_tokens, cache_salt);
    if (st.ok()) {
      scripts_[id] = Scripted{static_cast<int32_t>(prompt.size()), max_tokens, stop_after};
      worker_.SetSalt(id, cache_salt);
    }
    return st;
  }

  // One engine turn: deliver result N-2 if needed, plan, send. False when idle (no work, no
  // plan in flight).
  bool Turn() {
    if (in_flight_.size() >= 2) DeliverOldest();
    s_.Schedule(&step_);
    Record(step_);
    if (step_.ShouldSend()) {
      worker_.Apply(step_);
      std::vector<RequestId> samplers;
      for (const ScheduledRequest& r : step_.requests) {
        if (r.samples) samplers.push_back(r.request_id);
      }
      in_flight_.push_back(std::move(samplers));
      return true;
    }
    if (in_flight_.empty()) return false;
    DeliverOldest();
    return true;
  }

  void RunToIdle(int max_turns = 100000) {
    for (int i = 0; i < max_turns; ++i) {
      if (!Turn()) return;
    }
    ADD_FAILURE() << "not idle after " << max_turns << " turns";
  }

  void DeliverOldest() {
    ASSERT_FALSE(in_flight_.empty());
    const std::vector<RequestId> samplers = std::move(in_flight_.front());
    in_flight_.pop_front();
    for (RequestId id : samplers) Deliver(id);
  }

  // The engine cancels `id` (Finish kCancelled), wherever it is.
  void Cancel(RequestId id) {
    ASSERT_TRUE(s_.Finish(id, FinishReason::kCancelled).ok());
    Finished(id, FinishReason::kCancelled);
  }

  const ScheduledStep& step() const { return step_; }
  std::map<RequestId, Scripted>& scripts() { return scripts_; }
  const std::vector<std::vector<RequestId>>& admissions() const { return admissions_; }
  int64_t num_preempted() const { return num_preempted_; }
  // Victims that had sampled nothing since their latest admission.
  int64_t num_preempted_without_progress() const { return num_preempted_without_progress_; }
  int64_t num_mixed_steps() const { return num_mixed_steps_; }
  int64_t num_steps() const { return num_steps_; }
  const FakeWorker& worker() const { return worker_; }
  size_t num_in_flight() const { return in_flight_.size(); }

 private:
  void Record(const ScheduledStep& step) {
    num_preempted_ += static_cast<int64_t>(step.preempted.size());
    for (RequestId id : step.preempted) {
      Scripted& sc = scripts_.at(id);
      if (sc.num_samples_this_admission == 0) ++num_preempted_without_progress_;
      ++sc.num_preemptions;
    }
    if (step.empty()) return;
    ++num_steps_;
    if (step.num_prefill_tokens > 0 && step.num_prefill_tokens < step.num_batched_tokens) {
      ++num_mixed_steps_;
    }
    std::vector<RequestId> admitted;
    for (const ScheduledRequest& r : step.requests) {
      Scripted& sc = scripts_.at(r.request_id);
      EXPECT_FALSE(sc.finished) << "finished request " << r.request_id << " scheduled";
      if (r.samples && sc.first_sample_step < 0) sc.first_sample_step = num_steps_;
      if (r.is_new) {
        if (sc.admitted_at_step < 0) sc.admitted_at_step = num_steps_;
        admitted.push_back(r.request_id);
        sc.tokens_this_admission = r.start_position;  // served from the prefix cache
        sc.cached_tokens += r.start_position;
        sc.num_samples_this_admission = 0;
        EXPECT_EQ(r.num_known_tokens, sc.num_prompt + sc.generated);
      }
      sc.tokens_this_admission += r.num_tokens;
      if (r.samples) ++sc.num_samples_this_admission;
      // Never more samples than max_tokens, counting those already delivered.
      EXPECT_LE(sc.generated + PendingOf(r.request_id) + (r.samples ? 1 : 0), sc.max_tokens);
    }
    if (!admitted.empty()) admissions_.push_back(std::move(admitted));
  }

  int32_t PendingOf(RequestId id) const {
    int32_t n = 0;
    for (const auto& plan : in_flight_) {
      for (RequestId x : plan) n += x == id ? 1 : 0;
    }
    return n;
  }

  void Deliver(RequestId id) {
    Scripted& sc = scripts_.at(id);
    if (sc.finished) {  // a late result: the engine ignores it
      ++sc.wasted;
      EXPECT_EQ(s_.OnTokenSampled(id, 7).status().code(), absl::StatusCode::kNotFound);
      return;
    }
    const absl::StatusOr<SampleOutcome> outcome =
        s_.OnTokenSampled(id, GeneratedToken(sc.generated));
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ++sc.generated;
    if (*outcome == SampleOutcome::kFinishedLength) {
      EXPECT_EQ(sc.generated, sc.max_tokens);
      Finished(id, FinishReason::kLength);
    } else if (sc.generated == sc.stop_after) {
      ASSERT_TRUE(s_.Finish(id, FinishReason::kStop).ok());
      Finished(id, FinishReason::kStop);
    }
  }

  void Finished(RequestId id, FinishReason reason) {
    Scripted& sc = scripts_.at(id);
    sc.finished = true;
    sc.reason = reason;
    EXPECT_FALSE(s_.GetRequest(id).has_value());
  }

  Scheduler& s_;
  FakeWorker worker_;
  ScheduledStep step_;
  std::deque<std::vector<RequestId>> in_flight_;  // per unanswered plan: requests that sample
  std::map<RequestId, Scripted> scripts_;
  std::vector<std::vector<RequestId>> admissions_;  // per step with admissions, in order
  int64_t num_preempted_ = 0;
  int64_t num_preempted_without_progress_ = 0;
  int64_t num_mixed_steps_ = 0;
  int64_t num_steps_ = 0;
};

}  // namespace tessera::router::testing
