#include "router/state_snapshots.h"

#include "common/util/check.h"

namespace tessera::router {

StateSnapshots::StateSnapshots(int32_t num_slots, int32_t num_blocks)
    : slots_(static_cast<size_t>(num_slots) + 1),
      snapshot_of_(static_cast<size_t>(num_blocks), kNoSnapshot) {
  TESSERA_CHECK(num_slots >= 1 && num_blocks >= 1, "StateSnapshots: empty pool");
  free_ids_.reserve(static_cast<size_t>(num_slots));
  for (SnapshotId id = num_slots; id >= 1; --id) free_ids_.push_back(id);  // 1 handed out first
}

StateSnapshots::Slot& StateSnapshots::At(SnapshotId id) {
  TESSERA_CHECK(id >= 1 && id <= num_slots(), "StateSnapshots: id out of range");
  return slots_[static_cast<size_t>(id)];
}

SnapshotId StateSnapshots::Reserve() {
  SnapshotId id = kNoSnapshot;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    // The least recently used attached id; O(num_slots), only when the pool is full.
    uint64_t oldest = UINT64_MAX;
    for (SnapshotId s = 1; s <= num_slots(); ++s) {
      const Slot& slot = slots_[static_cast<size_t>(s)];
      if (slot.state == State::kAttached && slot.last_used < oldest) {
        oldest = slot.last_used;
        id = s;
      }
    }
    if (id == kNoSnapshot) return kNoSnapshot;
    Detach(id);
    ++num_evicted_;
  }
  At(id) = Slot{.state = State::kReserved, .block = kNullBlock, .last_used = ++clock_};
  return id;
}

void StateSnapshots::Attach(SnapshotId id, BlockId block) {
  Slot& slot = At(id);
  TESSERA_CHECK(slot.state == State::kReserved, "StateSnapshots: attaching an unreserved id");
  if (snapshot_of_[static_cast<size_t>(block)] != kNoSnapshot) {
    Release(id);
    return;
  }
  slot = Slot{.state = State::kAttached, .block = block, .last_used = ++clock_};
  snapshot_of_[static_cast<size_t>(block)] = id;
  ++num_attached_;
}

void StateSnapshots::Release(SnapshotId id) {
  Slot& slot = At(id);
  TESSERA_CHECK(slot.state == State::kReserved, "StateSnapshots: releasing an unreserved id");
  slot = Slot{};
  free_ids_.push_back(id);
}

void StateSnapshots::Touch(SnapshotId id) {
  Slot& slot = At(id);
  TESSERA_CHECK(slot.state == State::kAttached, "StateSnapshots: touching an unattached id");
  slot.last_used = ++clock_;
}

void StateSnapshots::Detach(SnapshotId id) {
  Slot& slot = At(id);
  snapshot_of_[static_cast<size_t>(slot.block)] = kNoSnapshot;
  slot = Slot{};
  --num_attached_;
}

void StateSnapshots::OnBlockEvicted(BlockId block) {
  const SnapshotId id = snapshot_of_[static_cast<size_t>(block)];
  if (id == kNoSnapshot) return;
  Detach(id);
  free_ids_.push_back(id);
}

}  // namespace tessera::router
