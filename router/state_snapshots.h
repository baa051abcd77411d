// StateSnapshots: the router's book of the worker's recurrent-state snapshots (hybrid models,
// DESIGN.md §4; the protocol in docs/design/hybrid-models.md). A hybrid model's cached prefix is
// usable only up to a block whose end the worker holds the linear-attention state for: a
// snapshot, saved by a plan (SequenceStep.save_snapshot) and restored at an admission
// (NewSequence.restore_snapshot). The router owns the ids, as it owns the KV blocks.
//
// Ids are [1, num_slots]. Each is free, reserved (a plan saves into it; the block it will
// describe is not indexed yet) or attached to one indexed block (the state after that block's
// last token). A block has at most one snapshot. Reserve() takes a free id, else evicts the
// least recently used attached one (its block keeps its K/V but loses the state: a lookup then
// stops before it); reserved ids are never evicted. Evicting a block from the prefix cache
// frees its snapshot (BlockManager calls OnBlockEvicted).
//
// Memory: two int32 per block and a few per id, reserved up front; no call allocates.
// Owner: the router's engine thread (via BlockManager / Scheduler). Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "router/prefix_cache.h"

namespace tessera::router {

using SnapshotId = int32_t;
inline constexpr SnapshotId kNoSnapshot = 0;

class StateSnapshots {
 public:
  // Preconditions: num_slots >= 1, num_blocks >= 1.
  StateSnapshots(int32_t num_slots, int32_t num_blocks);

  // A reserved id, or kNoSnapshot when every id is reserved.
  SnapshotId Reserve();
  // Gives a reserved id to `block` (indexed, it ends where the snapshot was taken). If `block`
  // has one already, that one stays (same content, same state) and `id` is freed.
  void Attach(SnapshotId id, BlockId block);
  // Frees a reserved id that will not be attached.
  void Release(SnapshotId id);
  // The snapshot attached to `block`, or kNoSnapshot.
  SnapshotId SnapshotOf(BlockId block) const { return snapshot_of_[static_cast<size_t>(block)]; }
  // Marks an attached id used now (a lookup restores it): evicted last.
  void Touch(SnapshotId id);
  // `block` left the prefix cache: its snapshot (if any) is free again.
  void OnBlockEvicted(BlockId block);

  int32_t num_slots() const { return static_cast<int32_t>(slots_.size()) - 1; }
  int32_t num_attached() const { return num_attached_; }
  int64_t num_evicted() const { return num_evicted_; }  // attached ids taken back by Reserve

 private:
  enum class State { kFree, kReserved, kAttached };
  struct Slot {
    State state = State::kFree;
    BlockId block = kNullBlock;
    uint64_t last_used = 0;
  };

  Slot& At(SnapshotId id);
  void Detach(SnapshotId id);

  std::vector<Slot> slots_;              // [num_slots + 1]; slot 0 unused
  std::vector<SnapshotId> free_ids_;     // stack
  std::vector<SnapshotId> snapshot_of_;  // [num_blocks]
  uint64_t clock_ = 0;
  int32_t num_attached_ = 0;
  int64_t num_evicted_ = 0;
};

}  // namespace tessera::router
