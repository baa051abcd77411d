// ScheduledStep: what Scheduler::Schedule() decided for one forward step, as plain data. The
// router's engine turns it into a StepPlan (DESIGN.md §2); nothing here knows about protobuf.
//
// The engine owns one (or two, alternating) ScheduledStep objects and passes them to every
// Schedule() call: the vectors keep their capacity, so planning allocates nothing per step.
//
// Order the worker must apply a plan in: first drop `dropped_slots`, then run `requests`. A slot
// dropped in a step may be handed to a new request in the same step.
//
// Owner: the router's engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "router/block_manager.h"

namespace tessera::router {

using RequestId = uint64_t;

// One request's share of a step: process known tokens [start_position, start_position +
// num_tokens) of the request in worker slot `slot`.
struct ScheduledRequest {
  RequestId request_id = 0;
  int32_t slot = -1;  // in [0, max_num_seqs)

  // First step since (re)admission: the worker has no state for this request, so the plan must
  // carry its full description (all num_known_tokens token ids, the prompt length, sampling
  // params and seed). start_position is 0 then.
  bool is_new = false;
  // True when the chunk processes tokens the router sent the worker (prompt, or tokens
  // generated before a preemption and now recomputed). False for a decode: one token the worker
  // sampled itself and feeds back, so the plan carries no token id.
  bool is_prefill = false;
  // The chunk reaches the end of the request's known tokens, so the worker samples a token
  // after it (the engine gets it back through OnTokenSampled).
  bool samples = false;

  int32_t start_position = 0;  // = tokens computed before this step
  int32_t num_tokens = 0;      // >= 1

  // Block ids appended to the request's block table this step, as a range of
  // ScheduledStep::new_block_ids (use ScheduledStep::NewBlocks). For a new request this is its
  // whole initial table.
  int32_t new_blocks_begin = 0;
  int32_t num_new_blocks = 0;

  // Hybrid models' recurrent-state snapshots (0 = none): restore one at admission (is_new, with
  // start_position cached tokens), save one after this chunk (its end is a block boundary).
  int32_t restore_snapshot = 0;
  int32_t save_snapshot = 0;

  // Meaningful when is_new: the prompt length and how many known tokens (prompt + tokens
  // generated before a preemption) the plan must carry; read them with Scheduler::Tokens().
  int32_t num_prompt_tokens = 0;
  int32_t num_known_tokens = 0;
};

// A request the scheduler gave up on; the engine fails its client stream with `status`.
struct FailedRequest {
  RequestId request_id = 0;
  absl::Status status;
};

struct ScheduledStep {
  // Oldest running request first, then newly admitted ones in FCFS order. Empty: no work; the
  // engine sends a plan only when ShouldSend() (failed/preempted must be handled either way).
  std::vector<ScheduledRequest> requests;
  std::vector<BlockId> new_block_ids;  // backing store of ScheduledRequest::NewBlocks

  // Worker slots whose requests finished, were cancelled or were preempted since the previous
  // plan. Filled on every step, so a step with no work but drops is a drop-only plan.
  std::vector<int32_t> dropped_slots;
  std::vector<RequestId> preempted;  // preempted this step (back at the head of the queue)
  std::vector<FailedRequest> failed;  // removed from the scheduler; see FailedRequest

  int32_t num_batched_tokens = 0;  // sum of requests[i].num_tokens <= max_num_batched_tokens
  int32_t num_prefill_tokens = 0;  // the part of it in prefill chunks

  bool empty() const { return requests.empty(); }
  // A plan goes to the worker when it has work or slots to drop (a drop-only plan).
  bool ShouldSend() const { return !requests.empty() || !dropped_slots.empty(); }

  std::span<const BlockId> NewBlocks(const ScheduledRequest& r) const {
    return std::span<const BlockId>(new_block_ids)
        .subspan(static_cast<size_t>(r.new_blocks_begin), static_cast<size_t>(r.num_new_blocks));
  }

  // Empties every list, keeping capacity.
  void Clear() {
    requests.clear();
    new_block_ids.clear();
    dropped_slots.clear();
    preempted.clear();
    failed.clear();
    num_batched_tokens = 0;
    num_prefill_tokens = 0;
  }
};

}  // namespace tessera::router
