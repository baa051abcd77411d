// Scheduler phases of the prefix cache (see "Prefix cache" in scheduler.h): lookups at
// admission, registering blocks as they fill, salts. All of it is a no-op with the cache off.
#include <algorithm>
#include <span>

#include "common/util/check.h"
#include "router/scheduler.h"
#include "router/scheduler_request.h"

namespace tessera::router {

void Scheduler::AcquireSalt(Request& r) {
  r.salt = blocks_.caching() ? blocks_.cache().AcquireSalt(r.cache_salt) : kDefaultSalt;
}

void Scheduler::ReleaseSalt(Request& r) {
  if (blocks_.caching()) blocks_.cache().ReleaseSalt(r.salt);
  r.salt = kDefaultSalt;
}

Scheduler::PrefixHit Scheduler::LookupPrefix(const Request& r) {
  hit_ids_.clear();
  hit_hashes_.clear();
  PrefixHit hit;
  if (!blocks_.caching()) return hit;
  const PrefixCache& cache = blocks_.cache();
  const int32_t block_size = config_.block_size;
  const std::span<const int32_t> tokens(r.tokens);
  hit.hash = cache.SaltHash(r.salt);
  // Whole blocks within the first known - 1 tokens: even a full hit recomputes the last token.
  const auto max_blocks = (static_cast<int32_t>(tokens.size()) - 1) / block_size;
  for (int32_t b = 0; b < max_blocks; ++b) {
    const std::span<const int32_t> block_tokens =
        tokens.subspan(static_cast<size_t>(b) * block_size, static_cast<size_t>(block_size));
    const uint64_t hash = cache.HashBlock(hit.hash, block_tokens);
    const BlockId id = cache.Find(hash, hit.link, r.salt, block_tokens);
    if (id == kNullBlock) break;
    hit_ids_.push_back(id);
    hit_hashes_.push_back(hash);
    hit.hash = hash;
    hit.link = cache.LinkOf(id);
  }
  if (blocks_.needs_snapshots()) TrimToSnapshot(cache.SaltHash(r.salt), &hit);
  for (const BlockId id : hit_ids_) hit.num_revived += blocks_.RefCount(id) == 0 ? 1 : 0;
  hit.num_blocks = static_cast<int32_t>(hit_ids_.size());
  return hit;
}

// A hybrid's linear-attention layers need their state where the hit ends: keep the longest run
// of hit blocks whose last block carries a snapshot.
void Scheduler::TrimToSnapshot(uint64_t salt_hash, PrefixHit* hit) {
  const StateSnapshots& snapshots = blocks_.snapshots();
  size_t keep = hit_ids_.size();
  while (keep > 0 && snapshots.SnapshotOf(hit_ids_[keep - 1]) == kNoSnapshot) --keep;
  hit->num_cached_blocks = static_cast<int32_t>(hit_ids_.size());
  if (keep == 0 && !hit_ids_.empty()) ++prefix_cold_no_snapshot_;
  hit_ids_.resize(keep);
  hit_hashes_.resize(keep);
  if (keep == 0) {  // a cold start: the chain begins at the salt
    hit->hash = salt_hash;
    hit->link = BlockLink{};
    return;
  }
  hit->hash = hit_hashes_.back();
  hit->link = blocks_.cache().LinkOf(hit_ids_.back());
  hit->snapshot = snapshots.SnapshotOf(hit_ids_.back());
}

void Scheduler::AttachPrefix(Request& r, const PrefixHit& hit, ScheduledStep* step) {
  TESSERA_CHECK(r.block_table.empty(), "attaching a cached prefix to a request that has blocks");
  TESSERA_CHECK(hit.num_blocks == static_cast<int32_t>(hit_ids_.size()),
                "a prefix hit does not match the last lookup");
  for (const BlockId id : hit_ids_) {
    blocks_.Reuse(id);
    r.block_table.push_back(id);
    step->new_block_ids.push_back(id);
  }
  r.num_cached_tokens = hit.num_blocks * config_.block_size;
  r.num_computed = r.num_cached_tokens;
  r.restore_snapshot = hit.snapshot;
  if (hit.snapshot != kNoSnapshot) blocks_.snapshots().Touch(hit.snapshot);
  r.num_hashed_blocks = hit.num_blocks;
  r.chain_hash = hit.hash;
  r.chain_link = hit.link;
  if (!blocks_.caching()) return;
  prefix_query_tokens_ += static_cast<int64_t>(r.tokens.size());
  prefix_hit_tokens_ += r.num_cached_tokens;
}

void Scheduler::RegisterFullBlocks(Request& r) {
  if (!blocks_.caching()) return;
  const int32_t block_size = config_.block_size;
  // A block's content is final once its positions are computed (in a plan already built) and
  // every token id in it is known: a placeholder's value is not, until its result arrives.
  const int32_t num_full =
      std::min(r.num_computed, static_cast<int32_t>(r.tokens.size())) / block_size;
  TESSERA_CHECK(num_full <= static_cast<int32_t>(r.block_table.size()),
                "computed positions beyond a request's block table");
  const std::span<const int32_t> tokens(r.tokens);
  for (; r.num_hashed_blocks < num_full; ++r.num_hashed_blocks) {
    const auto b = static_cast<size_t>(r.num_hashed_blocks);
    const std::span<const int32_t> block_tokens =
        tokens.subspan(b * static_cast<size_t>(block_size), static_cast<size_t>(block_size));
    r.chain_hash = blocks_.cache().HashBlock(r.chain_hash, block_tokens);
    // A copy indexed already (another request computed the same prefix) wins; the chain goes on
    // through it so the next block is findable from the indexed copy.
    r.chain_link = blocks_.Register(r.block_table[b], r.chain_hash, r.chain_link, r.salt,
                                    block_tokens);
    AttachPendingSnapshot(r, (r.num_hashed_blocks + 1) * block_size);
  }
}

// The saved state describes the block ending at the boundary: the indexed copy of it (this
// request's block, or the copy another request registered first).
void Scheduler::AttachPendingSnapshot(Request& r, int32_t block_end) {
  for (Request::SnapshotMark& mark : r.snapshot_marks) {
    if (mark.pending == kNoSnapshot || mark.boundary != block_end) continue;
    StateSnapshots& snapshots = blocks_.snapshots();
    if (blocks_.cache().Contains(r.chain_link.block)) {
      snapshots.Attach(mark.pending, r.chain_link.block);
    } else {
      snapshots.Release(mark.pending);  // not indexed (a full hash bucket)
    }
    mark = {};
  }
}

void Scheduler::SetSnapshotBoundaries(Request& r, const PrefixHit& hit) const {
  r.snapshot_marks = {};
  if (!blocks_.needs_snapshots()) return;
  const int32_t bs = config_.block_size;
  const int32_t cached = hit.num_blocks * bs;
  // Cached blocks beyond the hit (no snapshot at their end): a prefix other requests share.
  const int32_t shared = hit.num_cached_blocks * bs;
  // The last whole block within the first prompt - 1 tokens: what a later lookup of the same
  // prompt can hit (LookupPrefix always recomputes the last token).
  const int32_t prompt_end = (r.num_prompt_tokens - 1) / bs * bs;
  size_t next = 0;
  for (const int32_t boundary : {shared, prompt_end}) {
    if (boundary <= cached || (next > 0 && boundary <= r.snapshot_marks[next - 1].boundary)) {
      continue;
    }
    r.snapshot_marks[next++].boundary = boundary;
  }
}

int32_t Scheduler::ChunkToSnapshotBoundary(const Request& r, int32_t start, int32_t n) const {
  for (const Request::SnapshotMark& mark : r.snapshot_marks) {
    if (start < mark.boundary && mark.boundary < start + n) return mark.boundary - start;
  }
  return n;
}

SnapshotId Scheduler::MaybeSaveSnapshot(Request& r) {
  for (Request::SnapshotMark& mark : r.snapshot_marks) {
    if (mark.boundary == 0 || mark.pending != kNoSnapshot || mark.boundary != r.num_computed) {
      continue;
    }
    const SnapshotId id = blocks_.snapshots().Reserve();
    if (id == kNoSnapshot) {
      ++snapshots_unavailable_;
      mark = {};
      return kNoSnapshot;
    }
    ++snapshots_saved_;
    // Attached when the block ending at the boundary registers (FinishStep: EmitChunk queued it).
    mark.pending = id;
    return id;
  }
  return kNoSnapshot;
}

void Scheduler::DropPendingSnapshots(Request& r) {
  for (Request::SnapshotMark& mark : r.snapshot_marks) {
    if (mark.pending != kNoSnapshot) blocks_.snapshots().Release(mark.pending);
    mark = {};
  }
}

}  // namespace tessera::router
