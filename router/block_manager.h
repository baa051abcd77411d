// BlockManager: the router's *logical* KV blocks (DESIGN.md §4). It hands out block ids and
// counts references; the worker owns the memory behind each id. Block tables are append-only and
// a block keeps its id for its whole life, so the worker can keep its own copy of every table
// and receive only the appended ids.
//
// Ids: the pool holds `num_blocks` ids [0, num_blocks); block 0 is the null block (padding in
// the worker's block tables) and is never handed out, so NumTotal() == num_blocks - 1. Free ids
// are handed out lowest first from a fresh pool, and a freed id is the next one handed out
// (LIFO), which keeps allocation O(1), allocation-free and deterministic (tests assert exact ids).
//
// Sharing: a block referenced by several block tables has a reference count > 1 (AddRef); it
// returns to the free pool when the last reference is freed. Freeing a free block is a broken
// invariant (double free) and aborts.
//
// Prefix caching (a later issue) plugs in here: a full block gets a hash slot in BlockState, and
// Free() at refcount 0 moves a hashed block to an LRU of cached free blocks instead of free_ids_;
// cached blocks still count as free (they are evicted on demand), so callers need not change.
//
// Owner: the router's engine thread (via Scheduler). Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera::router {

using BlockId = int32_t;
inline constexpr BlockId kNullBlock = 0;

class BlockManager {
 public:
  // Precondition: num_blocks >= 1 (block 0 alone is a pool with no usable block).
  explicit BlockManager(int32_t num_blocks);

  // Movable so an owner can swap in a new pool (Scheduler::Reconfigure); never copied.
  BlockManager(BlockManager&&) = default;
  BlockManager& operator=(BlockManager&&) = default;
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  // Usable blocks (the null block excluded). NumFree() + NumUsed() == NumTotal().
  int32_t NumTotal() const { return num_blocks_ - 1; }
  int32_t NumFree() const { return static_cast<int32_t>(free_ids_.size()); }
  int32_t NumUsed() const { return NumTotal() - NumFree(); }
  bool CanAllocate(int32_t n) const { return n <= NumFree(); }

  // Blocks needed to hold `num_tokens` positions.
  static int32_t BlocksFor(int64_t num_tokens, int32_t block_size) {
    return static_cast<int32_t>((num_tokens + block_size - 1) / block_size);
  }

  // Hands out one free block with refcount 1. Precondition: NumFree() > 0.
  BlockId Allocate();

  // Adds a reference to an allocated block (a second table now points at it).
  // Precondition: RefCount(id) >= 1.
  void AddRef(BlockId id);

  // Drops one reference; at zero the block is free again. Precondition: RefCount(id) >= 1
  // (otherwise: double free, abort).
  void Free(BlockId id);

  // Frees every block of a table, last block first, so that the ids come back out of Allocate()
  // in the table's original order (keeps a recomputed request's ids stable when nothing else ran).
  void FreeTable(std::span<const BlockId> table);

  // 0 for a free block. Precondition: 0 < id < num_blocks.
  int32_t RefCount(BlockId id) const;

 private:
  // Per-block bookkeeping; the prefix cache adds its hash and LRU links here.
  struct BlockState {
    int32_t ref_count = 0;
  };

  void CheckId(BlockId id) const;

  int32_t num_blocks_;
  std::vector<BlockState> blocks_;  // [num_blocks]
  std::vector<BlockId> free_ids_;   // stack: back() is handed out next
};

}  // namespace tessera::router
