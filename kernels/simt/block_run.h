// One emulated block: its threads as fibers, the scheduler that switches between them at
// synchronisation points, the block barrier and the warp-collective groups. Internal to the
// emulator (emulator.cc creates one per launch and reuses it for every block).
// Owned and called by one OS thread.
#pragma once

#include <boost/context/detail/fcontext.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <source_location>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/simt/emulator.h"
#include "kernels/simt/shared_arena.h"
#include "kernels/simt/thread_context.h"

namespace tessera::simt::detail {

enum class ThreadState { kRunnable, kAtBarrier, kInCollective, kExited };

struct WarpGroup {
  uint32_t mask = 0;
  uint32_t arrived = 0;
  uint32_t departed = 0;
  CollectiveKind kind = CollectiveKind::kSyncWarp;
  bool collecting = false;  // still waiting for lanes
  bool in_use = false;      // some lane has not read its result yet
  std::source_location site;
  std::array<LanePayload, 32> payload;
};

struct AsyncCopy {
  void* destination;
  const void* source;
  size_t bytes;
  int group;  // -1 until committed
};

struct EmulatedThread {
  boost::context::detail::fcontext_t context = nullptr;
  uint3 index{};
  int linear = 0;
  ThreadState state = ThreadState::kRunnable;
  const WarpGroup* group = nullptr;  // while kInCollective
  std::vector<AsyncCopy> async_copies;  // issued, not yet completed
  int committed_groups = 0;
  bool waited_on_grid = false;  // passed ptx::GridDependencyWait
};

class BlockRun {
 public:
  BlockRun(const LaunchConfig& config, const std::function<void()>& body);
  ~BlockRun();
  BlockRun(const BlockRun&) = delete;
  BlockRun& operator=(const BlockRun&) = delete;

  // Runs every thread of block `block_idx` to completion (or to the first detected error).
  absl::Status Run(uint3 block_idx);

  // Called from the running emulated thread.
  void Barrier(std::source_location where);
  WarpGroupView WarpArrive(uint32_t mask, CollectiveKind kind, const void* data, size_t bytes,
                           std::source_location where);
  void WarpDepart(const WarpGroupView& view);
  [[noreturn]] void Fail(const std::string& message);
  SharedArena& arena() { return arena_; }
  EmulatedThread& current() { return *current_; }

 private:
  static void FiberEntry(boost::context::detail::transfer_t transfer);
  void Yield();
  void OnExit(EmulatedThread& thread);
  void Release(std::vector<int> threads);
  void MaybeReleaseBarrier();
  int PickNext();
  std::string DescribeDeadlock() const;
  uint32_t ExitedLanes(int warp) const;
  uint32_t ExistingLanes(int warp) const;
  WarpGroup& GroupFor(int warp, uint32_t mask, CollectiveKind kind, std::source_location where);

  const LaunchConfig config_;
  const std::function<void()>& body_;
  const int num_threads_;
  char* stacks_ = nullptr;  // one stack per thread, each with a guard page below it
  size_t stack_stride_ = 0;
  size_t stacks_bytes_ = 0;
  SharedArena arena_;
  std::vector<EmulatedThread> threads_;
  std::vector<std::deque<WarpGroup>> warp_groups_;  // deque: stable addresses while in use
  std::deque<int> ready_;
  std::mt19937_64 rng_;
  int live_ = 0;
  std::vector<int> at_barrier_;
  std::source_location barrier_site_;
  std::optional<std::string> error_;
  EmulatedThread* current_ = nullptr;
  boost::context::detail::fcontext_t scheduler_ = nullptr;
};

// The block whose thread is running on this OS thread (nullptr outside a launch).
extern thread_local BlockRun* current_block;

}  // namespace tessera::simt::detail
