// Scheduler::Request and Scheduler::Budget: the scheduler's private per-request state, shared by
// its translation units (scheduler.cc: lifecycle and step phases; scheduler_prefix.cc: prefix
// cache lookups and block registration). Not part of the scheduler's API: include it only from
// those files.
//
// Owner: the router's engine thread (via Scheduler).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "router/prefix_cache.h"
#include "router/scheduler.h"

namespace tessera::router {

// One request's scheduling state. Known tokens = tokens + num_pending placeholders.
struct Scheduler::Request {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // prompt, then generated tokens in order
  int32_t num_prompt_tokens = 0;
  int32_t max_tokens = 0;
  int32_t num_pending = 0;   // sampled by a plan whose result has not arrived
  int32_t num_computed = 0;  // tokens computed since the last admission (cached ones included)
  // Tokens the worker got in the request's description at its last admission; positions below
  // are prefill (token ids from the router), positions from here on are decodes of tokens the
  // worker sampled itself.
  int32_t num_given = 0;
  int32_t slot = -1;
  bool running = false;
  // Backpressure: its client is not reading. Not scheduled (a running one keeps its slot and
  // blocks) and not admitted until unpaused.
  bool paused = false;
  int32_t num_preemptions = 0;
  // Progress (scheduler_admission.cc): generated + pending tokens at the latest admission. The
  // request has made progress once a token beyond them is sampled or in flight; until then it
  // is not chosen as a preemption victim while another candidate has progressed.
  int32_t progress_mark = 0;
  // Times a later request was admitted before it while it was the blocked head of the queue.
  int32_t num_overtaken = 0;
  // Growth reservation: KV positions this running request was promised room for by the
  // admissions since its own (each promised every running request its horizon's growth).
  int32_t reserved_to = 0;
  std::vector<BlockId> block_table;

  // Prefix cache. The salt's text is kept so Reconfigure can intern it in a new pool's cache.
  std::string cache_salt;
  SaltId salt = kDefaultSalt;
  int32_t num_cached_tokens = 0;  // served from the cache at the last admission
  // Blocks [0, num_hashed_blocks) of block_table are in the index (found there at admission, or
  // registered when they filled) or were duplicates of indexed blocks. chain_hash / chain_link:
  // the hash and the indexed content of the last of them, which the next one chains on.
  int32_t num_hashed_blocks = 0;
  uint64_t chain_hash = 0;
  BlockLink chain_link;
  // Hybrid models (BlockManager::needs_snapshots): block boundaries (tokens, ascending; 0 =
  // unused) where the worker saves the recurrent state for later hits — the end of the longest
  // cached prefix the admission found without a snapshot (a shared system prompt: the next
  // request with it hits) and the end of the prompt's last full block — each with the id a
  // plan saved into, attached to the block ending there once it is indexed. And the id the
  // admission restores (sent with the first chunk).
  struct SnapshotMark {
    int32_t boundary = 0;
    SnapshotId pending = kNoSnapshot;
  };
  std::array<SnapshotMark, 2> snapshot_marks{};
  SnapshotId restore_snapshot = kNoSnapshot;

  int32_t num_generated() const {
    return static_cast<int32_t>(tokens.size()) - num_prompt_tokens;
  }
  int32_t num_known() const { return static_cast<int32_t>(tokens.size()) + num_pending; }
  // Everything it may ever sample is sampled or in flight: nothing left to schedule.
  bool awaiting_last_token() const { return num_generated() + num_pending == max_tokens; }
  bool prefilling() const { return num_computed < num_given; }
  bool progressed() const { return num_generated() + num_pending > progress_mark; }
  // Output tokens it may still sample (>= 1 while it is scheduled or waiting).
  int32_t remaining() const { return max_tokens - num_generated(); }
  // KV positions it can ever occupy: the last sampled token is never fed back.
  int32_t max_positions() const { return num_prompt_tokens + max_tokens - 1; }
};

// What is left of this step's limits.
struct Scheduler::Budget {
  int32_t tokens = 0;
  int32_t prefill_tokens = 0;
};

// The cached prefix a lookup found for a waiting request (block ids in Scheduler::hit_ids_).
struct Scheduler::PrefixHit {
  int32_t num_blocks = 0;
  int32_t num_revived = 0;  // of them, cached free blocks (they leave the free pool)
  uint64_t hash = 0;        // chain state after the last hit block (salt hash when none)
  BlockLink link;
  SnapshotId snapshot = kNoSnapshot;  // hybrid models: the state at the hit's end
  // Hybrid models: cached blocks found before trimming to the last one with a snapshot.
  int32_t num_cached_blocks = 0;
};

}  // namespace tessera::router
