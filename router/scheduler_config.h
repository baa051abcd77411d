// SchedulerConfig: the continuous-batching scheduler's limits and policies. Capacity fields come
// from the worker's Describe (DESIGN.md §2); the rest from router flags. Plain data, validated
// by ValidateSchedulerConfig before a Scheduler uses it.
#pragma once

#include <cstdint>

#include "router/published_prefixes.h"
#include "absl/status/status.h"

namespace tessera::router {

struct SchedulerConfig {
  // Token budget of one step: tokens processed across all scheduled requests.
  int32_t max_num_batched_tokens = 2048;
  // Requests running at once; also the number of worker slots, [0, max_num_seqs).
  int32_t max_num_seqs = 256;
  // Tokens per KV block and blocks in the pool (block 0, the null block, included), from
  // Describe.
  int32_t block_size = 16;
  int32_t num_blocks = 0;
  // Longest sequence a request may reach (prompt + max_tokens), from Describe.
  int32_t max_context = 4096;
  // Waiting-queue capacity for new requests; AddRequest answers RESOURCE_EXHAUSTED beyond it.
  // (Preempted requests go back to the queue regardless: they were admitted already.)
  int32_t max_waiting = 1024;

  // Prefix cache (DESIGN.md §4): full blocks are indexed by a hash chain and shared between
  // requests with the same prefix (and cache salt); freed cached blocks stay findable until
  // evicted. Off: every admission computes its whole prompt (the router's --no-prefix-cache).
  bool enable_prefix_cache = true;
  // Bits kept of every prefix-cache hash, in [1, 64]. Only tests lower it (to force collisions:
  // hits are confirmed by content, so a narrow hash costs hit rate, never correctness).
  int32_t prefix_cache_hash_bits = 64;
  // Where the prefix cache publishes its blocks' hashes for routing (engine_group.h; borrowed,
  // outlives the scheduler); null: nowhere. Needs 64-bit hashes.
  PublishedPrefixes* published_prefixes = nullptr;
  // Hybrid models (the worker's Describe says PREFIX_SHARING_STATE_SNAPSHOTS): the worker's
  // recurrent-state snapshots. A cached prefix is used only up to a block the worker holds the
  // state at the end of; each admission asks for a snapshot at its prompt's last full block
  // (cutting the prefill chunk there). 0: the model needs none (attention only).
  int32_t state_snapshot_slots = 0;

  // Fair progress under KV pressure (issue 15; policy and its justification in
  // scheduler_admission.cc). A request is admitted only if the free blocks cover its known tokens
  // plus `reserve_horizon_tokens` more of its own, and every running request's growth over the
  // same horizon (a short request's horizon is what it has left); so a newcomer is not evicted
  // again within its horizon. 0 = off: admission checks only the blocks of the chunk it
  // schedules now, and the queue is strictly FCFS (the policy before issue 15).
  int32_t reserve_horizon_tokens = 64;
  // Backfill: when the head of the waiting queue does not fit, a later request whose whole
  // remaining output fits in the horizon (it will give its blocks back soon) may be admitted
  // before it, at most this many times per head; then the head blocks the queue until admitted.
  int32_t max_overtakes = 64;

  // Optional policies, off by default.
  //
  // decode_stable: a step never mixes prefill chunks with decodes, so decode steps keep a
  // steady latency and stay eligible for the worker's CUDA-graph replay (DESIGN.md §5). When
  // both kinds of work are ready, steps alternate: after a decode-only step comes a
  // prefill-only step and vice versa, so neither side starves. If the preferred kind yields
  // nothing (e.g. no block for the admission), the step falls back to the other kind.
  bool decode_stable = false;
  // Caps the prefill tokens of one step (running chunked prefills and admissions together);
  // 0 = no cap beyond max_num_batched_tokens. Bounds how much one step's latency grows when
  // long prompts arrive.
  int32_t max_prefill_tokens_per_step = 0;
};

// INVALID_ARGUMENT naming the field when a limit is out of range.
absl::Status ValidateSchedulerConfig(const SchedulerConfig& config);

}  // namespace tessera::router
