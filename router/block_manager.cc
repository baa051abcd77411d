#include "router/block_manager.h"

#include "common/util/check.h"

namespace tessera::router {

BlockManager::BlockManager(int32_t num_blocks, PrefixCacheOptions cache)
    : num_blocks_(num_blocks), blocks_(num_blocks > 0 ? num_blocks : 0) {
  TESSERA_CHECK(num_blocks >= 1, "BlockManager needs num_blocks >= 1 (block 0 is the null block)");
  // Highest id at the bottom of the stack so a fresh pool hands out 1, 2, 3, ...
  free_ids_.reserve(static_cast<size_t>(num_blocks - 1));
  for (BlockId id = num_blocks - 1; id >= 1; --id) free_ids_.push_back(id);
  if (cache.enabled) {
    cache_.emplace(num_blocks, cache.block_size, cache.hash_bits);
    cache_->set_published(cache.published);
  }
  if (cache.enabled && cache.state_snapshot_slots > 0) {
    snapshots_.emplace(cache.state_snapshot_slots, num_blocks);
  }
}

void BlockManager::CheckId(BlockId id) const {
  TESSERA_CHECK(id != kNullBlock, "the null block (0) is never allocated, shared or freed");
  TESSERA_CHECK(id > 0 && id < num_blocks_, "KV block id out of range");
}

void BlockManager::LruPushBack(BlockId id) {
  BlockState& block = At(id);
  block.lru_prev = lru_tail_;
  block.lru_next = kNullBlock;
  if (lru_tail_ != kNullBlock) {
    At(lru_tail_).lru_next = id;
  } else {
    lru_head_ = id;
  }
  lru_tail_ = id;
  ++num_lru_;
}

void BlockManager::LruUnlink(BlockId id) {
  BlockState& block = At(id);
  if (block.lru_prev != kNullBlock) {
    At(block.lru_prev).lru_next = block.lru_next;
  } else {
    lru_head_ = block.lru_next;
  }
  if (block.lru_next != kNullBlock) {
    At(block.lru_next).lru_prev = block.lru_prev;
  } else {
    lru_tail_ = block.lru_prev;
  }
  block.lru_prev = block.lru_next = kNullBlock;
  --num_lru_;
}

BlockId BlockManager::Allocate() {
  BlockId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    // Evict the least recently freed cached block: it leaves the index, so no later lookup can
    // find content that is about to be overwritten.
    TESSERA_CHECK(lru_head_ != kNullBlock,
                  "Allocate() with no free KV block (check CanAllocate first)");
    id = lru_head_;
    LruUnlink(id);
    cache_->Erase(id);
    if (snapshots_.has_value()) snapshots_->OnBlockEvicted(id);
  }
  BlockState& block = At(id);
  TESSERA_CHECK(block.ref_count == 0, "a block on the free list has references");
  block.ref_count = 1;
  return id;
}

void BlockManager::AddRef(BlockId id) {
  CheckId(id);
  BlockState& block = At(id);
  TESSERA_CHECK(block.ref_count >= 1, "AddRef on a free KV block");
  ++block.ref_count;
}

void BlockManager::Free(BlockId id) {
  CheckId(id);
  BlockState& block = At(id);
  TESSERA_CHECK(block.ref_count >= 1, "double free of a KV block (refcount would go negative)");
  if (--block.ref_count > 0) return;
  if (IsCached(id)) {
    LruPushBack(id);  // stays findable until evicted
  } else {
    free_ids_.push_back(id);
  }
}

void BlockManager::FreeTable(std::span<const BlockId> table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) Free(*it);
}

int32_t BlockManager::RefCount(BlockId id) const {
  CheckId(id);
  return blocks_[static_cast<size_t>(id)].ref_count;
}

void BlockManager::Reuse(BlockId id) {
  CheckId(id);
  TESSERA_CHECK(IsCached(id), "Reuse of a KV block that is not in the prefix cache");
  BlockState& block = At(id);
  if (block.ref_count == 0) LruUnlink(id);
  ++block.ref_count;
}

BlockLink BlockManager::Register(BlockId id, uint64_t hash, BlockLink parent, SaltId salt,
                                 std::span<const int32_t> tokens) {
  CheckId(id);
  TESSERA_CHECK(caching(), "Register with the prefix cache off");
  TESSERA_CHECK(At(id).ref_count >= 1, "registering a free KV block in the prefix cache");
  return cache_->Insert(id, hash, parent, salt, tokens);
}

}  // namespace tessera::router
