// Test helper: a minimal router that drives the step protocol the way tessera-router does —
// chunked prefill, one-token decodes with no token ids, blocks appended as they fill, drops when
// a request reaches max_tokens, preemption with re-admission, prefix-cache hits — so tests can
// run request mixes through a StepExecutor or a Worker stream.
//
// NextPlan predicts samples (a slot whose computed count reaches its known tokens will sample),
// so plan N+1 can be built before result N arrives, like the real router's one step in flight.
// Not thread-safe; one test thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "common/util/check.h"
#include "tessera/worker/v1/worker.pb.h"

namespace tessera::worker::testing {

namespace v1 = ::tessera::worker::v1;

// Greedy, no filters or penalties, logprobs on (proto3 zeros are not valid parameters).
inline v1::SamplingParams DefaultSampling() {
  v1::SamplingParams p;
  p.set_temperature(0.0f);
  p.set_top_p(1.0f);
  p.set_repetition_penalty(1.0f);
  p.set_logprobs(true);
  return p;
}

struct SimRequest {
  std::vector<int32_t> prompt;
  v1::SamplingParams sampling = DefaultSampling();
  int max_tokens = 8;
  int arrival_step = 1;  // first step it may be admitted in
  int chunk = 1000;      // prefill tokens per step
  // Blocks already holding the K/V of the first tokens (a prefix-cache hit at admission);
  // borrowed: the router never frees them.
  std::vector<int32_t> cached_blocks{};
  v1::Grammar grammar{};  // structured output (kind NONE: free)

  // Results, in order.
  std::vector<int32_t> tokens{};
  std::vector<float> logprobs{};
  std::vector<v1::SampledToken> sampled{};
};

class SimRouter {
 public:
  SimRouter(int block_size, int num_blocks, int max_num_seqs) : block_size_(block_size) {
    for (int b = 1; b < num_blocks; ++b) free_blocks_.push_back(b);
    for (int s = 0; s < max_num_seqs; ++s) free_slots_.push_back(s);
  }

  int Add(SimRequest request) {
    requests_.push_back({.request = std::move(request)});
    return static_cast<int>(requests_.size()) - 1;
  }
  const SimRequest& request(int i) const { return requests_[i].request; }
  int slot_of(int i) const { return requests_[i].slot; }
  const std::vector<int32_t>& blocks_of(int i) const { return requests_[i].blocks; }
  bool Done() const {
    for (const State& s : requests_) {
      if (s.phase != Phase::kFinished) return false;
    }
    return pending_drops_.empty();
  }

  // The next plan; empty (no drops, admissions or sequences) when nothing can run.
  v1::StepPlan NextPlan() {
    v1::StepPlan plan;
    plan.set_step(++step_);
    for (int slot : pending_drops_) plan.add_drop_slots(slot);
    pending_drops_.clear();
    expected_.emplace_back();
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (requests_[i].phase == Phase::kRunning) Schedule(static_cast<int>(i), &plan);
    }
    for (size_t i = 0; i < requests_.size(); ++i) {
      State& s = requests_[i];
      if (s.phase != Phase::kWaiting || s.request.arrival_step > static_cast<int>(step_) ||
          free_slots_.empty()) {
        continue;
      }
      Admit(s, &plan);
      Schedule(static_cast<int>(i), &plan);
    }
    return plan;
  }

  // Records the sampled tokens; returns false when they are not the slots expected, in plan
  // order.
  bool OnResult(const v1::StepResult& result) {
    TESSERA_CHECK(!expected_.empty(), "SimRouter: a result with no plan in flight");
    const std::vector<Sample> expected = std::move(expected_.front());
    expected_.pop_front();
    if (result.step() != ++results_seen_ || result.sampled_size() != static_cast<int>(expected.size())) {
      return false;
    }
    for (int k = 0; k < result.sampled_size(); ++k) {
      const v1::SampledToken& t = result.sampled(k);
      if (t.slot() != expected[k].slot) return false;
      SimRequest& r = requests_[expected[k].request].request;
      r.tokens.push_back(t.token_id());
      r.logprobs.push_back(t.logprob());
      r.sampled.push_back(t);
    }
    return true;
  }

  // Preempts running request i (all its results must have arrived): the next plan drops its
  // slot; it is re-admitted later with prompt + generated tokens. Its first `keep_cached_blocks`
  // blocks stay untouched and come back as a prefix-cache hit.
  void Preempt(int i, int keep_cached_blocks) {
    State& s = requests_[i];
    TESSERA_CHECK(s.phase == Phase::kRunning, "SimRouter: preempting a request not running");
    TESSERA_CHECK(static_cast<int>(s.request.tokens.size()) == s.num_scheduled_samples,
                  "SimRouter: preempting with results in flight");
    pending_drops_.push_back(s.slot);
    free_slots_.push_back(s.slot);
    std::vector<int32_t> kept(s.blocks.begin(), s.blocks.begin() + keep_cached_blocks);
    FreeOwnedBlocks(s, keep_cached_blocks);
    s.request.cached_blocks = kept;
    s.phase = Phase::kWaiting;
    s.slot = -1;
  }

 private:
  enum class Phase { kWaiting, kRunning, kFinished };
  struct State {
    SimRequest request;
    Phase phase = Phase::kWaiting;
    int slot = -1;
    int computed = 0;
    int known = 0;  // predicted: includes samples scheduled but not yet received
    int num_scheduled_samples = 0;
    int num_borrowed_blocks = 0;
    size_t num_sent_blocks = 0;
    std::vector<int32_t> blocks{};
  };
  struct Sample {
    int slot = 0;
    int request = 0;
  };

  void Admit(State& s, v1::StepPlan* plan) {
    s.slot = free_slots_.front();
    free_slots_.pop_front();
    s.phase = Phase::kRunning;
    v1::NewSequence* seq = plan->add_new_sequences();
    seq->set_slot(s.slot);
    *seq->mutable_sampling() = s.request.sampling;
    if (s.request.grammar.kind() != v1::GRAMMAR_KIND_NONE) *seq->mutable_grammar() = s.request.grammar;
    for (int32_t t : s.request.prompt) seq->add_tokens(t);
    for (int32_t t : s.request.tokens) seq->add_tokens(t);
    seq->set_num_prompt_tokens(static_cast<int32_t>(s.request.prompt.size()));
    s.blocks = s.request.cached_blocks;
    s.num_borrowed_blocks = static_cast<int>(s.blocks.size());
    s.computed = s.num_borrowed_blocks * block_size_;
    seq->set_num_cached_tokens(s.computed);
    s.known = seq->tokens_size();
    s.num_scheduled_samples = static_cast<int>(s.request.tokens.size());
    s.num_sent_blocks = 0;  // the cached blocks go out with this plan's sequence entry
  }

  void Schedule(int index, v1::StepPlan* plan) {
    State& s = requests_[index];
    if (s.num_scheduled_samples == s.request.max_tokens) {
      // Finished: dropped in this plan (drops apply before admissions, so the slot and blocks
      // may be reused right away).
      plan->add_drop_slots(s.slot);
      free_slots_.push_back(s.slot);
      FreeOwnedBlocks(s, 0);
      s.phase = Phase::kFinished;
      return;
    }
    const int n = std::min(s.request.chunk, s.known - s.computed);
    v1::SequenceStep* step = plan->add_sequences();
    step->set_slot(s.slot);
    step->set_num_tokens(n);
    while (static_cast<int>(s.blocks.size()) * block_size_ < s.computed + n) {
      TESSERA_CHECK(!free_blocks_.empty(), "SimRouter: out of blocks");
      s.blocks.push_back(free_blocks_.front());
      free_blocks_.pop_front();
    }
    for (size_t b = s.num_sent_blocks; b < s.blocks.size(); ++b) {
      step->add_new_blocks(s.blocks[b]);
    }
    s.num_sent_blocks = s.blocks.size();
    s.computed += n;
    if (s.computed == s.known) {
      ++s.known;
      ++s.num_scheduled_samples;
      expected_.back().push_back({.slot = s.slot, .request = index});
    }
  }

  void FreeOwnedBlocks(State& s, int keep) {
    const int from = std::max(keep, s.num_borrowed_blocks);
    for (size_t b = from; b < s.blocks.size(); ++b) free_blocks_.push_back(s.blocks[b]);
    s.blocks.clear();
  }

  int block_size_;
  uint64_t step_ = 0;
  uint64_t results_seen_ = 0;
  std::deque<std::vector<Sample>> expected_;  // per plan in flight: who samples, in order
  std::deque<int32_t> free_blocks_;
  std::deque<int> free_slots_;
  std::vector<int> pending_drops_;
  std::vector<State> requests_;
};

}  // namespace tessera::worker::testing
