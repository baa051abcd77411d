#include "router/block_manager.h"

#include "common/util/check.h"

namespace tessera::router {

BlockManager::BlockManager(int32_t num_blocks)
    : num_blocks_(num_blocks), blocks_(num_blocks > 0 ? num_blocks : 0) {
  TESSERA_CHECK(num_blocks >= 1, "BlockManager needs num_blocks >= 1 (block 0 is the null block)");
  // Highest id at the bottom of the stack so a fresh pool hands out 1, 2, 3, ...
  free_ids_.reserve(static_cast<size_t>(num_blocks - 1));
  for (BlockId id = num_blocks - 1; id >= 1; --id) free_ids_.push_back(id);
}

void BlockManager::CheckId(BlockId id) const {
  TESSERA_CHECK(id != kNullBlock, "the null block (0) is never allocated, shared or freed");
  TESSERA_CHECK(id > 0 && id < num_blocks_, "KV block id out of range");
}

BlockId BlockManager::Allocate() {
  TESSERA_CHECK(!free_ids_.empty(), "Allocate() with no free KV block (check CanAllocate first)");
  const BlockId id = free_ids_.back();
  free_ids_.pop_back();
  BlockState& block = blocks_[static_cast<size_t>(id)];
  TESSERA_CHECK(block.ref_count == 0, "a block on the free list has references");
  block.ref_count = 1;
  return id;
}

void BlockManager::AddRef(BlockId id) {
  CheckId(id);
  BlockState& block = blocks_[static_cast<size_t>(id)];
  TESSERA_CHECK(block.ref_count >= 1, "AddRef on a free KV block");
  ++block.ref_count;
}

void BlockManager::Free(BlockId id) {
  CheckId(id);
  BlockState& block = blocks_[static_cast<size_t>(id)];
  TESSERA_CHECK(block.ref_count >= 1, "double free of a KV block (refcount would go negative)");
  if (--block.ref_count == 0) free_ids_.push_back(id);
}

void BlockManager::FreeTable(std::span<const BlockId> table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) Free(*it);
}

int32_t BlockManager::RefCount(BlockId id) const {
  CheckId(id);
  return blocks_[static_cast<size_t>(id)].ref_count;
}

}  // namespace tessera::router
