// BlockManager: the router's *logical* KV blocks (DESIGN.md §4). It hands out block ids, counts
// references and keeps the prefix cache's free blocks; the worker owns the memory behind each
// id. Block tables are append-only and a block keeps its id for its whole life, so the worker can
// keep its own copy of every table and receive only the appended ids.
//
// Ids: the pool holds `num_blocks` ids [0, num_blocks); block 0 is the null block (padding in
// the worker's block tables) and is never handed out, so NumTotal() == num_blocks - 1.
//
// A free block is in one of two places:
//   - the free stack: never hashed (or its hash was dropped). Handed out first, lowest id first
//     from a fresh pool, a freed id next (LIFO): O(1), allocation-free, deterministic (tests
//     assert exact ids).
//   - the LRU of cached free blocks (prefix cache on): full blocks still in the PrefixCache
//     index, so a later request can find and reuse them (Reuse). They count as free: Allocate()
//     evicts the least recently freed one (removing it from the index) only when the free stack
//     is empty. FreeTable frees a table's last block first, so a chain's tail blocks are evicted
//     before the prefixes they hang from.
//
// Sharing: a block referenced by several block tables has a reference count > 1 (AddRef, or
// Reuse for an indexed block); it is free again when the last reference is dropped. Freeing a
// free block is a broken invariant (double free) and aborts.
//
// Owner: the router's engine thread (via Scheduler). Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "router/prefix_cache.h"
#include "router/state_snapshots.h"

namespace tessera::router {

struct PrefixCacheOptions {
  bool enabled = false;
  int32_t block_size = 16;
  int32_t hash_bits = 64;  // see PrefixCache
  // > 0 (hybrid models, with the cache enabled): a cached prefix also needs the worker's
  // recurrent-state snapshot at its end; the ids are kept in StateSnapshots.
  int32_t state_snapshot_slots = 0;
  // Where the cache publishes its blocks' hashes for routing (engine_group.h); null: nowhere.
  PublishedPrefixes* published = nullptr;
};

class BlockManager {
 public:
  // Precondition: num_blocks >= 1 (block 0 alone is a pool with no usable block).
  explicit BlockManager(int32_t num_blocks, PrefixCacheOptions cache = {});

  // Movable so an owner can swap in a new pool (Scheduler::Reconfigure); never copied.
  BlockManager(BlockManager&&) = default;
  BlockManager& operator=(BlockManager&&) = default;
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  // Usable blocks (the null block excluded). NumFree() + NumUsed() == NumTotal(), where the
  // free ones are NumUncachedFree() + NumCachedFree().
  int32_t NumTotal() const { return num_blocks_ - 1; }
  int32_t NumFree() const { return NumUncachedFree() + num_lru_; }
  int32_t NumUsed() const { return NumTotal() - NumFree(); }
  int32_t NumUncachedFree() const { return static_cast<int32_t>(free_ids_.size()); }
  int32_t NumCachedFree() const { return num_lru_; }
  bool CanAllocate(int32_t n) const { return n <= NumFree(); }

  // Blocks needed to hold `num_tokens` positions.
  static int32_t BlocksFor(int64_t num_tokens, int32_t block_size) {
    return static_cast<int32_t>((num_tokens + block_size - 1) / block_size);
  }

  // Hands out one free block with refcount 1: from the free stack, else the least recently
  // freed cached block, which leaves the prefix-cache index. Precondition: NumFree() > 0.
  BlockId Allocate();

  // Adds a reference to an allocated block (a second table now points at it).
  // Precondition: RefCount(id) >= 1.
  void AddRef(BlockId id);

  // Drops one reference; at zero the block is free again (to the LRU when it is indexed).
  // Precondition: RefCount(id) >= 1 (otherwise: double free, abort).
  void Free(BlockId id);

  // Frees every block of a table, last block first, so that the ids come back out of Allocate()
  // in the table's original order (keeps a recomputed request's ids stable when nothing else ran)
  // and a cached chain's tail is evicted before its head.
  void FreeTable(std::span<const BlockId> table);

  // 0 for a free block. Precondition: 0 < id < num_blocks.
  int32_t RefCount(BlockId id) const;

  // --- Prefix cache (precondition for all of these: caching()). ---
  bool caching() const { return cache_.has_value(); }
  PrefixCache& cache() { return *cache_; }
  const PrefixCache& cache() const { return *cache_; }
  // The index holds `id` (it may be in use or a cached free block).
  bool IsCached(BlockId id) const { return caching() && cache_->Contains(id); }
  // Takes a reference to an indexed block found by a lookup; a cached free block leaves the
  // LRU. Precondition: IsCached(id).
  void Reuse(BlockId id);
  // Hybrid models: the state snapshots attached to cached blocks (an evicted block frees its
  // own). Precondition for snapshots(): needs_snapshots().
  bool needs_snapshots() const { return snapshots_.has_value(); }
  StateSnapshots& snapshots() { return *snapshots_; }
  const StateSnapshots& snapshots() const { return *snapshots_; }
  // Indexes a full, allocated block (PrefixCache::Insert); returns the link later blocks of the
  // chain must name as their parent. Precondition: RefCount(id) >= 1, !IsCached(id).
  BlockLink Register(BlockId id, uint64_t hash, BlockLink parent, SaltId salt,
                     std::span<const int32_t> tokens);

 private:
  // Per-block bookkeeping. lru_prev/lru_next link the cached free blocks (kNullBlock ends).
  struct BlockState {
    int32_t ref_count = 0;
    BlockId lru_prev = kNullBlock;
    BlockId lru_next = kNullBlock;
  };

  void CheckId(BlockId id) const;
  BlockState& At(BlockId id) { return blocks_[static_cast<size_t>(id)]; }
  void LruPushBack(BlockId id);
  void LruUnlink(BlockId id);

  int32_t num_blocks_;
  std::vector<BlockState> blocks_;  // [num_blocks]
  std::vector<BlockId> free_ids_;   // stack: back() is handed out next
  // Cached free blocks, least recently freed at the head (evicted first).
  BlockId lru_head_ = kNullBlock;
  BlockId lru_tail_ = kNullBlock;
  int32_t num_lru_ = 0;
  std::optional<PrefixCache> cache_;  // set when prefix caching is on
  std::optional<StateSnapshots> snapshots_;  // set when cached prefixes need state snapshots
};

}  // namespace tessera::router
