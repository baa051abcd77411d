#include "router/scheduler.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"
#include "router/scheduler_request.h"

namespace tessera::router {

namespace {

PrefixCacheOptions CacheOptions(const SchedulerConfig& config) {
  return PrefixCacheOptions{.enabled = config.enable_prefix_cache,
                            .block_size = config.block_size,
                            .hash_bits = config.prefix_cache_hash_bits,
                            .state_snapshot_slots = config.state_snapshot_slots,
                            .published = config.published_prefixes};
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerConfig& config) {
  if (absl::Status s = ValidateSchedulerConfig(config); !s.ok()) return s;
  return std::unique_ptr<Scheduler>(new Scheduler(config));
}

Scheduler::~Scheduler() = default;

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config), blocks_(config.num_blocks, CacheOptions(config)) {
  // Reconfigure() installs the slots, reserving every per-step container up front so planning
  // never allocates.
  running_.reserve(static_cast<size_t>(config.max_num_seqs));
  absl::Status s = Reconfigure(config);
  TESSERA_CHECK(s.ok(), "Reconfigure failed on a fresh scheduler");
}

absl::Status Scheduler::Reconfigure(const SchedulerConfig& config) {
  if (absl::Status s = ValidateSchedulerConfig(config); !s.ok()) return s;
  if (!running_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Reconfigure with ", running_.size(), " running requests: finish them first"));
  }
  // Waiting requests hold salts interned in the old pool's cache.
  for (Request* r : waiting_) ReleaseSalt(*r);
  config_ = config;
  blocks_ = BlockManager(config.num_blocks, CacheOptions(config));
  for (Request* r : waiting_) AcquireSalt(*r);
  hit_ids_.reserve(
      static_cast<size_t>(BlockManager::BlocksFor(config.max_context, config.block_size)));
  const auto num_slots = static_cast<size_t>(config.max_num_seqs);
  free_slots_.clear();
  free_slots_.reserve(num_slots);
  for (int32_t slot = config.max_num_seqs - 1; slot >= 0; --slot) free_slots_.push_back(slot);
  slot_in_use_.assign(num_slots, false);
  running_.reserve(num_slots);
  to_register_.reserve(num_slots);
  pending_drops_.clear();  // the new worker holds no slot state
  pending_drops_.reserve(num_slots);
  last_step_kind_ = StepKind::kNone;
  // In-flight tokens of preempted requests died with the old stream; recompute resamples them.
  for (Request* r : waiting_) r->num_pending = 0;
  return absl::OkStatus();
}

absl::Status Scheduler::CheckFitsAlone(int64_t num_prompt_tokens, int64_t max_tokens) const {
  const int64_t total = num_prompt_tokens + max_tokens;
  if (total > config_.max_context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", num_prompt_tokens, " tokens) + max_tokens (", max_tokens, ") = ", total,
        " exceeds the model's context of ", config_.max_context,
        " tokens; shorten the prompt or lower max_tokens"));
  }
  // The last sampled token is never fed back, so the KV cache holds at most total - 1 positions.
  const int32_t needed = BlockManager::BlocksFor(total - 1, config_.block_size);
  if (needed > blocks_.NumTotal()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", num_prompt_tokens, " tokens) + max_tokens (", max_tokens, ") needs ", needed,
        " KV blocks of ", config_.block_size, " tokens, but the worker's KV pool holds only ",
        blocks_.NumTotal(), " blocks (", int64_t{blocks_.NumTotal()} * config_.block_size,
        " tokens); shorten the prompt or lower max_tokens"));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::AddRequest(RequestId id, std::span<const int32_t> prompt,
                                   int32_t max_tokens, std::string_view cache_salt) {
  if (requests_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("request id ", id, " is already in use"));
  }
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens = ", max_tokens, ", must be >= 1"));
  }
  if (absl::Status s = CheckFitsAlone(static_cast<int64_t>(prompt.size()), max_tokens); !s.ok()) {
    return s;
  }
  if (waiting_.size() >= static_cast<size_t>(config_.max_waiting)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the waiting queue is full (", config_.max_waiting,
        " requests); retry later, or raise the router's max_waiting"));
  }
  auto r = std::make_unique<Request>();
  r->id = id;
  r->tokens.assign(prompt.begin(), prompt.end());
  r->num_prompt_tokens = static_cast<int32_t>(prompt.size());
  r->max_tokens = max_tokens;
  r->cache_salt = cache_salt;
  AcquireSalt(*r);
  waiting_.push_back(r.get());
  requests_.emplace(id, std::move(r));
  return absl::OkStatus();
}

void Scheduler::Schedule(ScheduledStep* step) {
  step->Clear();
  to_register_.clear();
  // No-ops after the first call: the step's lists never outgrow these bounds.
  const auto max_seqs = static_cast<size_t>(config_.max_num_seqs);
  step->requests.reserve(max_seqs);
  step->dropped_slots.reserve(max_seqs);
  step->new_block_ids.reserve(
      max_seqs + static_cast<size_t>(config_.max_num_batched_tokens / config_.block_size));
  Budget budget{config_.max_num_batched_tokens, config_.max_prefill_tokens_per_step > 0
                                                    ? config_.max_prefill_tokens_per_step
                                                    : std::numeric_limits<int32_t>::max()};
  const StepKinds kinds = ChooseStepKinds();
  RunPass(kinds, budget, step);
  // decode_stable: the preferred kind had nothing to run; run the other kind rather than idle.
  if (step->empty() && !(kinds.decode && kinds.prefill)) {
    RunPass(StepKinds{!kinds.decode, !kinds.prefill}, budget, step);
  }
  FinishStep(step);
}

Scheduler::StepKinds Scheduler::ChooseStepKinds() const {
  if (!config_.decode_stable) return StepKinds{};
  bool has_decode = false;
  bool has_prefill = !waiting_.empty() && !free_slots_.empty();
  for (const Request* r : running_) {
    if (r->awaiting_last_token()) continue;
    (r->prefilling() ? has_prefill : has_decode) = true;
  }
  if (!has_decode || !has_prefill) return StepKinds{};  // one kind only: nothing to keep apart
  // Alternate so neither side starves: a prefill-only step follows a decode-only one.
  if (last_step_kind_ == StepKind::kDecode) return StepKinds{false, true};
  return StepKinds{true, false};
}

void Scheduler::RunPass(StepKinds kinds, Budget& budget, ScheduledStep* step) {
  ScheduleRunning(kinds, budget, step);
  // A preemption means blocks are short: admitting now would only evict someone else again.
  if (kinds.prefill && step->preempted.empty()) AdmitWaiting(budget, step);
}

void Scheduler::ScheduleRunning(StepKinds kinds, Budget& budget, ScheduledStep* step) {
  // A preemption removes r or a newer request (never one scheduled earlier in this step), so the
  // indices before i stay valid; when r itself goes, running_[i] is already the next one.
  size_t i = 0;
  while (i < running_.size() && budget.tokens > 0) {
    if (ScheduleOneRunning(*running_[i], kinds, budget, step)) ++i;
  }
}

bool Scheduler::ScheduleOneRunning(Request& r, StepKinds kinds, Budget& budget,
                                   ScheduledStep* step) {
  if (r.awaiting_last_token() || r.paused) return true;
  const bool prefill = r.prefilling();
  if (prefill ? !kinds.prefill : !kinds.decode) return true;
  const int32_t remaining = r.num_known() - r.num_computed;
  TESSERA_CHECK(remaining >= 1, "a running request has nothing to compute but is not done");
  int32_t n = std::min(remaining, budget.tokens);
  if (prefill) n = std::min(n, budget.prefill_tokens);
  if (n <= 0) return true;  // prefill cap used up; decodes may still fit
  n = ChunkToSnapshotBoundary(r, r.num_computed, n);
  const auto blocks_begin = static_cast<int32_t>(step->new_block_ids.size());
  if (!ReserveBlocks(r, r.num_computed + n, step)) return false;  // r preempted itself
  EmitChunk(r, n, /*is_new=*/false, blocks_begin, budget, step);
  return true;
}

bool Scheduler::ReserveBlocks(Request& r, int32_t num_positions, ScheduledStep* step) {
  const int32_t needed = BlockManager::BlocksFor(num_positions, config_.block_size) -
                         static_cast<int32_t>(r.block_table.size());
  while (!blocks_.CanAllocate(needed)) {
    // Admission guarantees every request fits in the pool alone, so the oldest request always
    // finds room after the newer ones are gone.
    TESSERA_CHECK(running_.size() > 1 || running_.back() != &r,
                  "a request alone in the KV pool does not fit (admission check broken)");
    Request& victim = ChooseVictim(r);
    Preempt(victim, step);
    if (&victim == &r) return false;
  }
  AppendBlocks(r, needed, step);
  return true;
}

void Scheduler::AppendBlocks(Request& r, int32_t num_blocks, ScheduledStep* step) {
  for (int32_t b = 0; b < num_blocks; ++b) {
    const BlockId id = blocks_.Allocate();
    r.block_table.push_back(id);
    step->new_block_ids.push_back(id);
  }
}

void Scheduler::EmitChunk(Request& r, int32_t num_tokens, bool is_new, int32_t new_blocks_begin,
                          Budget& budget, ScheduledStep* step) {
  ScheduledRequest& e = step->requests.emplace_back();
  e.request_id = r.id;
  e.slot = r.slot;
  e.is_new = is_new;
  e.is_prefill = r.prefilling();
  e.start_position = r.num_computed;
  e.num_tokens = num_tokens;
  e.new_blocks_begin = new_blocks_begin;
  e.num_new_blocks = static_cast<int32_t>(step->new_block_ids.size()) - new_blocks_begin;
  if (is_new) {
    e.num_prompt_tokens = r.num_prompt_tokens;
    e.num_known_tokens = r.num_given;
    e.restore_snapshot = r.restore_snapshot;
    r.restore_snapshot = kNoSnapshot;
  }
  r.num_computed += num_tokens;
  e.save_snapshot = MaybeSaveSnapshot(r);
  e.samples = r.num_computed == r.num_known();
  if (e.samples) {
    TESSERA_CHECK(r.num_pending <= 1,
                  "a request would get a third token in flight: the engine must deliver "
                  "result N before calling Schedule() for step N+2");
    ++r.num_pending;  // the placeholder the next step may already decode
  }
  // A block just filled with known tokens: index it once this step is planned (FinishStep). In
  // steady decode this is true once every block_size steps, so the common case is one compare.
  if (blocks_.caching() &&
      std::min(r.num_computed, static_cast<int32_t>(r.tokens.size())) >=
          (r.num_hashed_blocks + 1) * config_.block_size) {
    to_register_.push_back(&r);
  }
  budget.tokens -= num_tokens;
  step->num_batched_tokens += num_tokens;
  if (e.is_prefill) {
    budget.prefill_tokens -= num_tokens;
    step->num_prefill_tokens += num_tokens;
  }
}

void Scheduler::FinishStep(ScheduledStep* step) {
  // Drops ride on the next plan; with no work they go out alone (a drop-only plan), so the
  // worker frees a cancelled request's slot now rather than whenever the next request comes.
  step->dropped_slots.assign(pending_drops_.begin(), pending_drops_.end());
  pending_drops_.clear();
  // Only now, after this step's admissions: a block this step computes must not be handed out
  // as cached in the same plan (the worker would read it while writing it).
  for (Request* r : to_register_) RegisterFullBlocks(*r);
  if (step->empty()) return;
  ++num_steps_;
  if (step->num_prefill_tokens == 0) {
    last_step_kind_ = StepKind::kDecode;
  } else if (step->num_prefill_tokens == step->num_batched_tokens) {
    last_step_kind_ = StepKind::kPrefill;
  } else {
    last_step_kind_ = StepKind::kMixed;
  }
}

int32_t Scheduler::AcquireSlot() {
  TESSERA_CHECK(!free_slots_.empty(), "no free worker slot");
  const int32_t slot = free_slots_.back();
  free_slots_.pop_back();
  TESSERA_CHECK(!slot_in_use_[static_cast<size_t>(slot)], "worker slot handed out twice");
  slot_in_use_[static_cast<size_t>(slot)] = true;
  return slot;
}

void Scheduler::ReleaseSlot(Request& r) {
  TESSERA_CHECK(r.slot >= 0 && slot_in_use_[static_cast<size_t>(r.slot)],
                "releasing a worker slot that is not in use");
  slot_in_use_[static_cast<size_t>(r.slot)] = false;
  free_slots_.push_back(r.slot);
  pending_drops_.push_back(r.slot);
  r.slot = -1;
}

absl::StatusOr<SampleOutcome> Scheduler::OnTokenSampled(RequestId id, int32_t token) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is not scheduled (finished?)"));
  }
  Request& r = *it->second;
  if (r.num_pending == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("request ", id, " has no sampled token in flight"));
  }
  r.tokens.push_back(token);
  --r.num_pending;
  if (r.num_generated() < r.max_tokens) return SampleOutcome::kContinue;
  TESSERA_CHECK(r.num_pending == 0, "tokens in flight past max_tokens");
  Retire(r);
  ++num_finished_[static_cast<size_t>(FinishReason::kLength)];
  return SampleOutcome::kFinishedLength;
}

absl::Status Scheduler::SetPaused(RequestId id, bool paused) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is not scheduled (finished?)"));
  }
  it->second->paused = paused;
  return absl::OkStatus();
}

absl::Status Scheduler::Finish(RequestId id, FinishReason reason) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is not scheduled (finished?)"));
  }
  Retire(*it->second);
  ++num_finished_[static_cast<size_t>(reason)];
  return absl::OkStatus();
}

void Scheduler::Retire(Request& r) {
  if (r.running) {
    const auto it = std::find(running_.begin(), running_.end(), &r);
    TESSERA_CHECK(it != running_.end(), "a running request is missing from the running list");
    running_.erase(it);
    RegisterFullBlocks(r);  // its last tokens may have arrived since it was last scheduled
    blocks_.FreeTable(r.block_table);
    ReleaseSlot(r);
  } else {
    const auto it = std::find(waiting_.begin(), waiting_.end(), &r);
    TESSERA_CHECK(it != waiting_.end(), "a waiting request is missing from the waiting queue");
    waiting_.erase(it);
  }
  Forget(r);
}

void Scheduler::Forget(Request& r) {
  DropPendingSnapshots(r);
  ReleaseSalt(r);
  requests_.erase(r.id);  // destroys r
}

std::optional<RequestSnapshot> Scheduler::GetRequest(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return std::nullopt;
  const Request& r = *it->second;
  RequestSnapshot s;
  s.running = r.running;
  s.slot = r.slot;
  s.num_prompt_tokens = r.num_prompt_tokens;
  s.num_generated = r.num_generated();
  s.num_pending = r.num_pending;
  s.num_computed = r.num_computed;
  s.max_tokens = r.max_tokens;
  s.num_blocks = static_cast<int32_t>(r.block_table.size());
  s.num_preemptions = r.num_preemptions;
  s.num_cached_tokens = r.num_cached_tokens;
  s.awaiting_last_token = r.awaiting_last_token();
  s.paused = r.paused;
  return s;
}

std::span<const int32_t> Scheduler::Tokens(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return {};
  return it->second->tokens;
}

std::span<const BlockId> Scheduler::BlockTable(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return {};
  return it->second->block_table;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = static_cast<int32_t>(running_.size());
  s.num_waiting = static_cast<int32_t>(waiting_.size());
  s.num_blocks_used = blocks_.NumUsed();
  s.num_blocks_total = blocks_.NumTotal();
  s.num_blocks_cached_free = blocks_.NumCachedFree();
  s.prefix_cache_query_tokens = prefix_query_tokens_;
  s.prefix_cache_hit_tokens = prefix_hit_tokens_;
  s.prefix_cache_cold_no_snapshot = prefix_cold_no_snapshot_;
  s.state_snapshots_saved = snapshots_saved_;
  s.state_snapshots_unavailable = snapshots_unavailable_;
  s.state_snapshots_evicted = blocks_.needs_snapshots() ? blocks_.snapshots().num_evicted() : 0;
  s.num_preemptions = num_preemptions_;
  s.num_preemptions_without_progress = num_preemptions_without_progress_;
  s.num_steps = num_steps_;
  s.num_failed = num_failed_;
  s.num_finished = num_finished_;
  return s;
}

}  // namespace tessera::router
