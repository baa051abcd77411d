// Scheduler: the router's continuous-batching scheduler (DESIGN.md §3). Pure planning: no I/O,
// no clocks, no threads. A request is "computed tokens catching up with known tokens"; each
// Schedule() call plans one forward step under a token budget and a sequence limit, and owns the
// logical KV blocks (BlockManager) and the worker slots.
//
// Owner: the router's engine loop thread. Every method must be called from that one thread;
// client RPC handlers reach the scheduler only through the engine's queues.
//
// One step in flight. The engine sends plan N+1 before result N arrives. So when a chunk
// reaches the end of a request's known tokens (it samples), the scheduler immediately counts
// a *pending* token (a placeholder known token) and the next Schedule() can already plan the
// decode of that token; the worker feeds its own last sampled token. OnTokenSampled() fills the
// oldest placeholder. Engine contract: Schedule() for step N+2 is called only after result N
// was delivered, so a request has at most two pending tokens, and a preempted request has none
// left when it is re-admitted (both checked).
//
// Lifecycle of a request:
//   AddRequest -> waiting -> (admitted: slot + blocks) running -> ... -> finished
//                   ^------------- preempted (blocks and slot freed) ------'
// Who is admitted and who is preempted when blocks are short (issue 15: a growth reservation at
// admission, backfill of short requests past a blocked head, no second preemption before
// progress) is in scheduler_admission.cc, with its justification.
// A request finishes when the engine calls Finish() (stop token/string, cancel, error) or when
// its max_tokens-th token arrives (OnTokenSampled returns kFinishedLength). Once generated +
// pending == max_tokens it is no longer scheduled ("awaiting its last token", visible in
// RequestSnapshot). A finished request's slot is listed in the next plan's dropped_slots; any
// later result for it must be ignored by the engine (OnTokenSampled answers NOT_FOUND).
//
// Prefix cache (config.enable_prefix_cache, DESIGN.md §4; index in prefix_cache.h, free-block
// LRU in block_manager.h). What gets hashed: every *full* block of a request whose positions are
// computed (sent in a plan) and whose token ids are all known for sure: prompt blocks and blocks
// filled by generated tokens alike (as vLLM does), so a multi-turn follow-up or a recomputed
// preempted request finds its own earlier output. A placeholder token never enters a hash.
// Blocks are registered at the end of Schedule() (and when a request ends or is preempted):
// never in the step that computes them, so no plan asks the worker to read a block as cached
// while the same plan writes it. Admission looks up the request's known tokens block by block
// (hash, then exact content) and takes the longest run of whole matching blocks within the first
// known - 1 tokens: the last known token is always recomputed, because the worker needs its
// logits and must never write into a shared block. The hit blocks come first in the request's
// initial block table and its entry starts at start_position = cached tokens.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "router/block_manager.h"
#include "router/scheduled_step.h"
#include "router/scheduler_config.h"

namespace tessera::router {

enum class FinishReason { kStop, kLength, kCancelled, kError };
inline constexpr size_t kNumFinishReasons = 4;

enum class SampleOutcome {
  kContinue,        // more tokens to come
  kFinishedLength,  // that was token number max_tokens: the request is finished and removed
};

// A copy of one request's scheduling state (tests, debugging, metrics).
struct RequestSnapshot {
  bool running = false;  // false: waiting (never admitted, or preempted)
  int32_t slot = -1;     // -1 while waiting
  int32_t num_prompt_tokens = 0;
  int32_t num_generated = 0;  // tokens delivered through OnTokenSampled
  int32_t num_pending = 0;    // sampled by an unanswered plan, not delivered yet
  int32_t num_computed = 0;   // tokens scheduled since the last admission
  int32_t max_tokens = 0;
  int32_t num_blocks = 0;  // block table length
  int32_t num_preemptions = 0;
  int32_t num_cached_tokens = 0;  // served from the prefix cache at the latest admission
  // generated + pending == max_tokens: never scheduled again; finishes when the last pending
  // token arrives.
  bool awaiting_last_token = false;
  bool paused = false;  // SetPaused
};

// Read-only numbers for the router's metrics (DESIGN.md §7).
struct SchedulerStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_blocks_used = 0;
  int32_t num_blocks_total = 0;  // usable blocks (null block excluded)
  // Free blocks the prefix cache still indexes (counted free: evicted on demand).
  int32_t num_blocks_cached_free = 0;
  // Prefix cache, since creation: known tokens looked up at admissions (re-admissions after a
  // preemption included) and those served from the cache. 0 with the cache off.
  int64_t prefix_cache_query_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  // Hybrid models: lookups whose cached blocks had no state snapshot at any boundary (the
  // request ran cold), snapshots saved, and saves skipped because every id was reserved.
  int64_t prefix_cache_cold_no_snapshot = 0;
  int64_t state_snapshots_saved = 0;
  int64_t state_snapshots_unavailable = 0;
  int64_t state_snapshots_evicted = 0;
  int64_t num_preemptions = 0;   // total since creation
  // Of them, victims that had not made progress since their admission (no request that could
  // be preempted had; see scheduler_admission.cc).
  int64_t num_preemptions_without_progress = 0;
  int64_t num_steps = 0;         // non-empty steps planned
  int64_t num_failed = 0;        // requests the scheduler failed (FailedRequest)
  // Finished requests by FinishReason (Finish() calls, and kLength from OnTokenSampled).
  std::array<int64_t, kNumFinishReasons> num_finished{};
};

class Scheduler {
 public:
  // INVALID_ARGUMENT when the config is out of range (ValidateSchedulerConfig).
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerConfig& config);

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  ~Scheduler();  // out of line: Request is incomplete here

  // Queues a request at the tail of the waiting queue. `cache_salt` is its prefix-cache
  // namespace: cached blocks are shared only between requests with equal salts.
  //   INVALID_ARGUMENT: empty prompt, max_tokens < 1, prompt + max_tokens > max_context, or more
  //                     KV blocks than the whole pool holds;
  //   ALREADY_EXISTS:   `id` is in use;
  //   RESOURCE_EXHAUSTED: the waiting queue holds max_waiting requests.
  absl::Status AddRequest(RequestId id, std::span<const int32_t> prompt, int32_t max_tokens,
                          std::string_view cache_salt = {});

  // Plans the next step into *step (cleared first; its vectors are reused). Phases: running
  // requests oldest first (preempting the newest that made progress when blocks run out), then,
  // if nothing was preempted, admission FCFS under the growth reservation, with short requests
  // backfilling past a head that does not fit (scheduler_admission.cc). Send the plan only when step->ShouldSend(); its failed/preempted
  // lists need handling either way.
  void Schedule(ScheduledStep* step);

  // Delivers the token sampled for `id`'s oldest pending placeholder (results arrive in plan
  // order). NOT_FOUND: `id` finished already (a late result; ignore it). FAILED_PRECONDITION: no
  // token of `id` is in flight (a result for a slot that did not sample).
  absl::StatusOr<SampleOutcome> OnTokenSampled(RequestId id, int32_t token);

  // Backpressure (issue 15): a paused request is not scheduled — a running one keeps its slot and
  // blocks, a waiting one is passed over by admission (the requests behind it may go first) —
  // until it is unpaused. Tokens already in flight for it still arrive. NOT_FOUND when unknown.
  absl::Status SetPaused(RequestId id, bool paused);

  // Removes a waiting or running request, freeing its blocks and slot (the slot is dropped in
  // the next plan). NOT_FOUND when `id` is unknown or already finished.
  absl::Status Finish(RequestId id, FinishReason reason);

  // Takes a new capacity after the worker reconnected and answered Describe again (DESIGN.md §2:
  // the engine first fails every running request). Waiting requests stay queued; their pending
  // tokens died with the old stream and are resampled after recompute; one that no longer fits
  // fails at its admission. FAILED_PRECONDITION while any request is running; INVALID_ARGUMENT
  // for a bad config.
  absl::Status Reconfigure(const SchedulerConfig& config);

  // nullopt when `id` is unknown.
  std::optional<RequestSnapshot> GetRequest(RequestId id) const;
  // Known tokens of `id` (prompt, then generated; placeholders excluded), empty when unknown.
  // Valid until the next call that mutates the scheduler. The engine reads the first
  // num_known_tokens of it for an is_new entry.
  std::span<const int32_t> Tokens(RequestId id) const;
  // Block table of `id` (empty when unknown or waiting); valid like Tokens(). Tests, debugging.
  std::span<const BlockId> BlockTable(RequestId id) const;
  // The logical KV pool, read-only (tests, debugging).
  const BlockManager& blocks() const { return blocks_; }

  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return config_; }

 private:
  struct Request;
  struct Budget;
  struct PrefixHit;
  struct StepKinds {
    bool decode = true;
    bool prefill = true;
  };
  enum class StepKind { kNone, kDecode, kPrefill, kMixed };

  explicit Scheduler(const SchedulerConfig& config);

  // Schedule() phases.
  StepKinds ChooseStepKinds() const;
  void RunPass(StepKinds kinds, Budget& budget, ScheduledStep* step);
  void ScheduleRunning(StepKinds kinds, Budget& budget, ScheduledStep* step);
  // False when `r` was preempted (it left running_).
  bool ScheduleOneRunning(Request& r, StepKinds kinds, Budget& budget, ScheduledStep* step);
  void FinishStep(ScheduledStep* step);

  // Admission and preemption under KV pressure (scheduler_admission.cc; the policy is there).
  enum class Admission { kAdmitted, kNoRoom, kFailed };
  void AdmitWaiting(Budget& budget, ScheduledStep* step);
  // Admits waiting_[index] if the reservation allows (kAdmitted / kFailed remove it).
  Admission TryAdmit(Request& r, size_t index, Budget& budget, ScheduledStep* step);
  // Free blocks `r`'s admission requires: its own blocks over its horizon (or only this chunk's
  // `chunk_blocks` with the reservation off) plus every running request's growth.
  int32_t AdmissionNeed(const Request& r, int32_t num_hit_blocks, int32_t chunk_blocks) const;
  // Blocks the running requests need to grow by `num_tokens` tokens each (capped per request).
  int32_t RunningGrowth(int32_t num_tokens) const;
  // Raises every running request's reserved_to to its growth over `r`'s horizon; sets r's.
  void PromiseGrowth(Request& r);
  // Whether `r` may be admitted before the blocked queue head `head` (backfill).
  bool MayOvertake(const Request& r, const Request& head) const;
  // The newest request among `r` and newer ones that has made progress (else the newest).
  Request& ChooseVictim(const Request& r);
  void Preempt(Request& victim, ScheduledStep* step);

  // Appends blocks so `r`'s table covers `num_positions`, preempting (ChooseVictim) while none
  // is free. False when `r` itself was preempted.
  bool ReserveBlocks(Request& r, int32_t num_positions, ScheduledStep* step);
  void AppendBlocks(Request& r, int32_t num_blocks, ScheduledStep* step);
  void EmitChunk(Request& r, int32_t num_tokens, bool is_new, int32_t new_blocks_begin,
                 Budget& budget, ScheduledStep* step);

  // Prefix cache phases (scheduler_prefix.cc); no-ops with the cache off.
  // The longest cached prefix of `r`'s known tokens that admission may use (ids in hit_ids_).
  PrefixHit LookupPrefix(const Request& r);
  // Takes the hit blocks as the head of `r`'s new block table and starts its chain after them.
  void AttachPrefix(Request& r, const PrefixHit& hit, ScheduledStep* step);
  // Indexes `r`'s blocks that became full of computed, known tokens.
  void RegisterFullBlocks(Request& r);
  // Hybrid models' state snapshots (scheduler_prefix.cc; no-ops when none are needed). The
  // boundaries an admission with `hit` wants snapshots at (Request::snapshot_marks).
  void SetSnapshotBoundaries(Request& r, const PrefixHit& hit) const;
  // `n` tokens from `start`, cut so the chunk ends at r's next snapshot boundary when it would
  // cross it (the worker saves the state at the end of a chunk).
  int32_t ChunkToSnapshotBoundary(const Request& r, int32_t start, int32_t n) const;
  // After r's chunk: the id to save into when the chunk ended at a boundary (reserved and
  // pending until the block registers), else 0.
  SnapshotId MaybeSaveSnapshot(Request& r);
  // Keeps the longest run of hit blocks whose last block carries a snapshot.
  void TrimToSnapshot(uint64_t salt_hash, PrefixHit* hit);
  // Attaches r's pending id for the boundary `block_end` to the block just indexed there.
  void AttachPendingSnapshot(Request& r, int32_t block_end);
  // Pending ids whose blocks will not be registered go back.
  void DropPendingSnapshots(Request& r);
  // Interns r.cache_salt in the current pool's cache; ReleaseSalt drops the reference.
  void AcquireSalt(Request& r);
  void ReleaseSalt(Request& r);

  absl::Status CheckFitsAlone(int64_t num_prompt_tokens, int64_t max_tokens) const;
  int32_t AcquireSlot();
  void ReleaseSlot(Request& r);
  // Frees `r`'s blocks and slot and forgets it; `r` is destroyed.
  void Retire(Request& r);
  // Forgets a request that holds no blocks or slot; `r` is destroyed.
  void Forget(Request& r);

  SchedulerConfig config_;
  BlockManager blocks_;
  absl::flat_hash_map<RequestId, std::unique_ptr<Request>> requests_;
  std::vector<Request*> running_;  // admission order: front() is the oldest
  std::deque<Request*> waiting_;   // FCFS; preempted requests re-enter at the front
  std::vector<int32_t> free_slots_;     // stack: back() is handed out next
  std::vector<bool> slot_in_use_;       // [max_num_seqs], guards against duplicate slots
  std::vector<int32_t> pending_drops_;  // slots freed since the last plan
  std::vector<Request*> to_register_;   // this step's requests with a newly full block
  std::vector<BlockId> hit_ids_;        // LookupPrefix's result
  StepKind last_step_kind_ = StepKind::kNone;
  int64_t num_preemptions_ = 0;
  int64_t num_preemptions_without_progress_ = 0;
  int64_t num_steps_ = 0;
  int64_t num_failed_ = 0;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  int64_t prefix_cold_no_snapshot_ = 0;
  int64_t snapshots_saved_ = 0;
  int64_t snapshots_unavailable_ = 0;
  std::vector<uint64_t> hit_hashes_;    // LookupPrefix: the chain hash after each hit block
  std::array<int64_t, kNumFinishReasons> num_finished_{};
};

}  // namespace tessera::router
