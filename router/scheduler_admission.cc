// Scheduler phases that decide who holds KV blocks under pressure (issue 15, item 3): admission
// with a growth reservation and bounded backfill, and the choice of a preemption victim.
//
// The failure this answers: once long requests fill the pool, every block a running request
// frees or gets is contended. Admitting by "does this step's chunk fit" (vLLM v1 adds only a
// ~1% free-block watermark) lets a newcomer in that the next block boundary of an older request
// evicts again (newest is preempted first); its recompute then fights for the same blocks: a
// short request got 1 token and then nothing, and preemptions climbed without progress.
//
// Policy (config.reserve_horizon_tokens = H, default 64 = 4 blocks of 16):
//  1. Reservation at admission. A waiting request r with h = min(H, tokens r may still sample) is
//     admitted only if the free blocks cover
//        r's blocks for its known tokens + h        (not just this step's chunk)
//      + each running request's growth over h tokens, or up to what an earlier admission
//        promised it if that is more (Request::reserved_to; capped at what it may ever hold),
//     and then promises every running request (and r) that growth. Requests grow by one token
//     per step, so the pool holds every promise: for h steps after r's admission no request
//     running then needs a block the pool does not have, and later admissions keep the
//     promise. A request that outgrows its promise takes any free block (work-conserving); if
//     none is left, the victim is the newest that made progress (3), so r is not evicted by
//     a request older than it within its horizon. A short request (what it may still sample
//     <= H) whose prompt fits one step's budget is therefore not preempted between admission
//     and its last token unless every request admitted after it is still in its first chunk.
//     Versus vLLM's fixed watermark: the reservation scales with how many requests are running
//     and how close each is to a block boundary, so it is ~0 on an idle pool (no idle capacity)
//     and large exactly when the pool is saturated (where a fixed 1% admits into a thrash). The
//     price is admitting long requests later than vLLM would when the pool is nearly full:
//     fewer concurrent long requests, each running without being evicted. It is cheaper than a
//     full max_tokens reservation (TGI-style), which idles most of the pool when requests stop
//     early at EOS.
//  2. Backfill. When the head of the waiting queue does not pass (1), a later request may still
//     be admitted if its whole remaining output is within the horizon (a short request, which
//     gives its blocks back within its prompt chunks + h steps), at most max_overtakes times
//     per head; after that the head blocks the queue, so a large request is delayed by a bounded
//     number of short ones. Long requests never overtake each other (FCFS among them).
//  3. Bounded churn. Progress = a token the request had not generated before its latest
//     admission was sampled (it is in flight or delivered). The victim, when a request r needs a
//     block and none is free, is the newest request among r and the newer ones that has made
//     progress; only if none of them has (they are all in their first chunks since admission)
//     the newest goes, as before (counted in num_preemptions_without_progress). So a preempted
//     request is not preempted again before it samples a new token, and each preemption of r
//     is paid for by at least one new token: preemptions(r) <= max_tokens(r).
//  Unchanged: running requests first, oldest first; no admission in a step that preempted; a
//  preempted request re-enters at the head of the queue (its blocks stay in the prefix cache).
//
// H = 0 turns (1) and (2) off: admission checks the chunk's blocks only, strictly FCFS.
//
// Owner: the router's engine thread (via Scheduler), like scheduler.cc.
#include <algorithm>
#include <utility>

#include "common/util/check.h"
#include "router/scheduler.h"
#include "router/scheduler_request.h"

namespace tessera::router {
namespace {

// Waiting requests examined per step behind a head that does not fit (bounds the admission
// phase's cost with a long queue: each examination is a prefix lookup and a pass over running).
constexpr int32_t kMaxBackfillScan = 32;

}  // namespace

int32_t Scheduler::RunningGrowth(int32_t num_tokens) const {
  int32_t blocks = 0;
  for (const Request* q : running_) {
    const int32_t target =
        std::min(std::max(q->num_known() + num_tokens, q->reserved_to), q->max_positions());
    blocks += std::max(0, BlockManager::BlocksFor(target, config_.block_size) -
                              static_cast<int32_t>(q->block_table.size()));
  }
  return blocks;
}

int32_t Scheduler::AdmissionNeed(const Request& r, int32_t num_hit_blocks,
                                 int32_t chunk_blocks) const {
  if (config_.reserve_horizon_tokens == 0) return chunk_blocks;
  const int32_t horizon = std::min(config_.reserve_horizon_tokens, r.remaining());
  const int32_t target = std::min(r.num_known() + horizon, r.max_positions());
  const int32_t own = std::max(
      chunk_blocks, BlockManager::BlocksFor(target, config_.block_size) - num_hit_blocks);
  return own + RunningGrowth(horizon);
}

bool Scheduler::MayOvertake(const Request& r, const Request& head) const {
  return config_.reserve_horizon_tokens > 0 && head.num_overtaken < config_.max_overtakes &&
         r.remaining() <= config_.reserve_horizon_tokens;
}

void Scheduler::AdmitWaiting(Budget& budget, ScheduledStep* step) {
  Request* blocked = nullptr;  // the first request that did not fit; later ones only backfill
  int32_t scanned = 0;
  size_t i = 0;
  while (i < waiting_.size() && !free_slots_.empty() && budget.tokens > 0 &&
         budget.prefill_tokens > 0) {
    Request& r = *waiting_[i];
    if (r.paused) {  // keeps its place; the requests behind it may go first
      ++i;
      continue;
    }
    if (blocked != nullptr) {
      if (++scanned > kMaxBackfillScan) return;
      if (!MayOvertake(r, *blocked)) {
        ++i;
        continue;
      }
    }
    switch (TryAdmit(r, i, budget, step)) {
      case Admission::kAdmitted:  // waiting_[i] is now the next one
        if (blocked != nullptr) ++blocked->num_overtaken;
        break;
      case Admission::kFailed:
        break;
      case Admission::kNoRoom:
        if (blocked == nullptr) blocked = &r;
        if (config_.reserve_horizon_tokens == 0 ||
            blocked->num_overtaken >= config_.max_overtakes) {
          return;  // FCFS: nobody overtakes the head
        }
        ++i;
        break;
    }
  }
}

Scheduler::Admission Scheduler::TryAdmit(Request& r, size_t index, Budget& budget,
                                         ScheduledStep* step) {
  const auto position = waiting_.begin() + static_cast<std::ptrdiff_t>(index);
  // Only reachable after Reconfigure shrank the pool or the context: fail, don't loop.
  if (absl::Status s = CheckFitsAlone(r.num_prompt_tokens, r.max_tokens); !s.ok()) {
    waiting_.erase(position);
    step->failed.push_back(FailedRequest{r.id, std::move(s)});
    ++num_failed_;
    Forget(r);
    return Admission::kFailed;
  }
  TESSERA_CHECK(r.num_pending == 0,
                "re-admitting a preempted request with a token in flight: the engine must "
                "deliver result N before calling Schedule() for step N+2");
  const auto known = static_cast<int32_t>(r.tokens.size());
  const PrefixHit hit = LookupPrefix(r);
  const int32_t cached = hit.num_blocks * config_.block_size;
  SetSnapshotBoundaries(r, hit);
  const int32_t n = ChunkToSnapshotBoundary(
      r, cached, std::min({known - cached, budget.tokens, budget.prefill_tokens}));
  const int32_t needed = BlockManager::BlocksFor(cached + n, config_.block_size) - hit.num_blocks;
  // Revived cached blocks leave the free pool too.
  if (!blocks_.CanAllocate(AdmissionNeed(r, hit.num_blocks, needed) + hit.num_revived)) {
    return Admission::kNoRoom;
  }
  waiting_.erase(position);
  // Room for everything the request may reach, so decode steps never grow these (no-op on
  // re-admission).
  r.tokens.reserve(static_cast<size_t>(r.num_prompt_tokens + r.max_tokens));
  r.block_table.reserve(static_cast<size_t>(
      BlockManager::BlocksFor(r.max_positions(), config_.block_size)));
  r.running = true;
  r.slot = AcquireSlot();
  r.num_computed = 0;
  r.num_given = known;
  r.progress_mark = r.num_generated();
  r.num_overtaken = 0;
  PromiseGrowth(r);
  running_.push_back(&r);
  const auto blocks_begin = static_cast<int32_t>(step->new_block_ids.size());
  AttachPrefix(r, hit, step);  // sets num_computed to the cached tokens
  AppendBlocks(r, needed, step);
  EmitChunk(r, n, /*is_new=*/true, blocks_begin, budget, step);
  return Admission::kAdmitted;
}

void Scheduler::PromiseGrowth(Request& r) {
  if (config_.reserve_horizon_tokens == 0) return;
  const int32_t horizon = std::min(config_.reserve_horizon_tokens, r.remaining());
  for (Request* q : running_) q->reserved_to = std::max(q->reserved_to, q->num_known() + horizon);
  r.reserved_to = r.num_known() + horizon;
}

Scheduler::Request& Scheduler::ChooseVictim(const Request& r) {
  // Only r and the requests newer than it: the older ones are scheduled in this step already.
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if ((*it)->progressed()) return **it;
    if (*it == &r) break;
  }
  ++num_preemptions_without_progress_;
  return *running_.back();
}

void Scheduler::Preempt(Request& victim, ScheduledStep* step) {
  const auto it = std::find(running_.begin(), running_.end(), &victim);
  TESSERA_CHECK(it != running_.end(), "preempting a request that is not running");
  running_.erase(it);
  // Its full blocks stay findable (until evicted): the recompute after re-admission is cheap.
  RegisterFullBlocks(victim);
  blocks_.FreeTable(victim.block_table);
  victim.block_table.clear();
  ReleaseSlot(victim);
  victim.running = false;
  victim.num_computed = 0;  // recompute: prompt + generated so far are re-prefilled
  DropPendingSnapshots(victim);
  victim.num_given = 0;
  ++victim.num_preemptions;
  waiting_.push_front(&victim);
  step->preempted.push_back(victim.id);
  ++num_preemptions_;
}

}  // namespace tessera::router
