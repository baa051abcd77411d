// Test harness for the scheduler: a FakeWorker that validates every plan the way the worker
// will (slots, block tables, positions), and an EngineDriver that plays the engine's side of
// the one-step-in-flight protocol (results of plan N are delivered before Schedule() for N+2).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "router/scheduler.h"

namespace tessera::router::testing {

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

// The worker's view: per slot, the request, its block table and computed positions.
class FakeWorker {
 public:
  explicit FakeWorker(const SchedulerConfig& config)
      : config_(config), slots_(static_cast<size_t>(config.max_num_seqs)) {}

  // Applies drops, then entries, checking what the worker's plan validation checks plus the
  // scheduler's step invariants (budget, sequence limit, exact block needs, no shared blocks).
  void Apply(const ScheduledStep& step) {
    for (int32_t slot : step.dropped_slots) Drop(slot);
    EXPECT_LE(static_cast<int>(step.requests.size()), config_.max_num_seqs);
    int32_t tokens = 0, prefill = 0;
    std::set<int32_t> seen;
    for (const ScheduledRequest& r : step.requests) {
      EXPECT_TRUE(seen.insert(r.slot).second) << "slot " << r.slot << " twice in one step";
      Run(step, r);
      tokens += r.num_tokens;
      if (r.is_prefill) prefill += r.num_tokens;
    }
    EXPECT_EQ(tokens, step.num_batched_tokens);
    EXPECT_EQ(prefill, step.num_prefill_tokens);
    EXPECT_LE(tokens, config_.max_num_batched_tokens) << "token budget exceeded";
    if (config_.max_prefill_tokens_per_step > 0) {
      EXPECT_LE(prefill, config_.max_prefill_tokens_per_step) << "prefill cap exceeded";
    }
  }

  int NumLiveSlots() const {
    int n = 0;
    for (const Slot& s : slots_) n += s.live ? 1 : 0;
    return n;
  }

 private:
  struct Slot {
    bool live = false;
    RequestId id = 0;
    int32_t computed = 0;
    std::vector<BlockId> table;
  };

  void Drop(int32_t slot) {
    ASSERT_TRUE(slot >= 0 && slot < config_.max_num_seqs) << "dropped slot " << slot;
    Slot& s = slots_[static_cast<size_t>(slot)];
    EXPECT_TRUE(s.live) << "dropping slot " << slot << " that holds no request";
    for (BlockId b : s.table) owned_.erase(b);
    s = Slot{};
  }

  void Run(const ScheduledStep& step, const ScheduledRequest& r) {
    ASSERT_TRUE(r.slot >= 0 && r.slot < config_.max_num_seqs) << "slot " << r.slot;
    Slot& s = slots_[static_cast<size_t>(r.slot)];
    EXPECT_GE(r.num_tokens, 1);
    if (r.is_new) {
      EXPECT_FALSE(s.live) << "new request " << r.request_id << " in live slot " << r.slot;
      EXPECT_EQ(r.start_position, 0);
      EXPECT_TRUE(r.is_prefill);
      EXPECT_GE(r.num_known_tokens, r.num_tokens);
      EXPECT_GE(r.num_known_tokens, r.num_prompt_tokens);
      s = Slot{true, r.request_id, 0, {}};
    } else {
      EXPECT_TRUE(s.live && s.id == r.request_id)
          << "request " << r.request_id << " continues in slot " << r.slot << " it does not hold";
    }
    EXPECT_EQ(r.start_position, s.computed) << "request " << r.request_id;
    for (BlockId b : step.NewBlocks(r)) {
      EXPECT_TRUE(b > 0 && b < config_.num_blocks) << "block id " << b;
      EXPECT_TRUE(owned_.insert(b).second) << "block " << b << " in two live tables";
      s.table.push_back(b);
    }
    s.computed += r.num_tokens;
    // Exactly the blocks needed to hold every computed position: no more, no less.
    EXPECT_EQ(static_cast<int32_t>(s.table.size()),
              BlockManager::BlocksFor(s.computed, config_.block_size))
        << "request " << r.request_id;
  }

  SchedulerConfig config_;
  std::vector<Slot> slots_;
  std::set<BlockId> owned_;
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
};

// Plays the engine: at most two plans unanswered, results delivered in order.
class EngineDriver {
 public:
  EngineDriver(Scheduler& scheduler) : s_(scheduler), worker_(scheduler.config()) {}

  absl::Status Add(RequestId id, int prompt, int max_tokens, int stop_after = 0) {
    absl::Status st = s_.AddRequest(id, Prompt(prompt), max_tokens);
    if (st.ok()) scripts_[id] = Scripted{prompt, max_tokens, stop_after};
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
  int64_t num_mixed_steps() const { return num_mixed_steps_; }
  int64_t num_steps() const { return num_steps_; }
  size_t num_in_flight() const { return in_flight_.size(); }

 private:
  void Record(const ScheduledStep& step) {
    num_preempted_ += static_cast<int64_t>(step.preempted.size());
    if (step.empty()) return;
    ++num_steps_;
    if (step.num_prefill_tokens > 0 && step.num_prefill_tokens < step.num_batched_tokens) {
      ++num_mixed_steps_;
    }
    std::vector<RequestId> admitted;
    for (const ScheduledRequest& r : step.requests) {
      Scripted& sc = scripts_.at(r.request_id);
      EXPECT_FALSE(sc.finished) << "finished request " << r.request_id << " scheduled";
      if (r.is_new) {
        admitted.push_back(r.request_id);
        sc.tokens_this_admission = 0;
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
    const absl::StatusOr<SampleOutcome> outcome = s_.OnTokenSampled(id, 1000 + sc.generated);
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
  int64_t num_mixed_steps_ = 0;
  int64_t num_steps_ = 0;
};

}  // namespace tessera::router::testing
