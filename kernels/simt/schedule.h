// The order in which the SIMT emulator runs a block's threads between synchronisation points.
// Chosen by the caller (a test harness flag, the emulated device's config), never read from the
// environment. Plain value type; thread-compatible.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera::simt {

enum class ScheduleKind {
  kInOrder,  // lowest thread index first; blocks in index order
  kReverse,  // highest thread index first; blocks in reverse order
  kRandom,   // a seeded random runnable thread at every switch; blocks shuffled
  // The lowest-indexed runnable thread at every switch (the others queue first-in first-out):
  // warp 0 runs as far as it can — through its shuffles, up to a block barrier — before warp 1
  // starts, which exposes a warp reusing shared memory that another warp has yet to read.
  kLowestFirst,
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::kInOrder;
  uint64_t seed = 0;  // only for kRandom

  // "in-order", "reverse", "lowest-first" or "random:SEED" (SEED a decimal integer).
  static absl::StatusOr<Schedule> Parse(std::string_view text);
  std::string ToString() const;

  static Schedule InOrder() { return {}; }
  static Schedule Reverse() { return {ScheduleKind::kReverse, 0}; }
  static Schedule Random(uint64_t seed) { return {ScheduleKind::kRandom, seed}; }
  static Schedule LowestFirst() { return {ScheduleKind::kLowestFirst, 0}; }
};

// For test names and failure messages (gtest finds it by argument-dependent lookup).
inline void PrintTo(const Schedule& schedule, std::ostream* out) { *out << schedule.ToString(); }

}  // namespace tessera::simt
