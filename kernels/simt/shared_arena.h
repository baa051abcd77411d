// Shared memory of an emulated block: one arena per launch, poisoned (every byte 0xFF) at the
// start of each block so a read before any write sees NaN/garbage instead of a previous block's
// data. Dynamic shared memory ends at a guard page (an overrun faults); static allocations are
// placed below it, one per declaration site, in first-use order. Owned by one BlockRun.
#pragma once

#include <cstddef>
#include <source_location>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"

namespace tessera::simt::detail {

class SharedArena {
 public:
  // `limit`: the block's static + dynamic bytes (<= kMaxSharedBytesPerBlock).
  SharedArena(size_t dynamic_bytes, size_t limit);
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  // Fills every byte handed out so far (and the dynamic region) with 0xFF.
  void PoisonForBlock();
  // The same address for the same `site` within a launch; an error when the block's total
  // would exceed the limit, or its static part kDefaultSharedBytesPerBlock (as nvcc's).
  absl::StatusOr<void*> Static(const void* site, size_t bytes, size_t alignment);
  void* Dynamic() const { return dynamic_; }
  size_t dynamic_bytes() const { return dynamic_bytes_; }

 private:
  char* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  char* dynamic_ = nullptr;  // ends at the guard page
  size_t dynamic_bytes_ = 0;
  size_t limit_ = 0;
  char* static_low_ = nullptr;  // static allocations grow down from dynamic_
  std::unordered_map<const void*, void*> sites_;
};

}  // namespace tessera::simt::detail
