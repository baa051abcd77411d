// What emulated device code asks of the emulator at run time: the current thread's identity,
// block barriers, warp collectives, shared memory and failure reporting. Called only from code
// running inside a launch (device_api.h wraps these in CUDA's names); calling them outside a
// launch aborts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>

#include "kernels/simt/vector_types.h"

namespace tessera::simt {

// CUDA's built-in variables, set by the emulator before it switches to a thread.
struct ThreadCoordinates {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
extern thread_local ThreadCoordinates current_coordinates;

namespace detail {

// Which warp-level operation a lane arrived at; all lanes of one collective must agree.
enum class CollectiveKind { kShuffle, kBallot, kAny, kAll, kSyncWarp, kMatrix };
const char* CollectiveName(CollectiveKind kind);

// One lane's contribution to a warp collective (the largest is an mma fragment set).
inline constexpr size_t kLanePayloadBytes = 64;
struct alignas(16) LanePayload {
  std::array<std::byte, kLanePayloadBytes> bytes;
};

struct WarpGroupView {
  const LanePayload* lanes;  // [32], valid for the lanes in `mask`
  uint32_t mask;
  int self_lane;
  const void* group;  // the emulator's record, for WarpDepart
};

// Arrives at a warp collective with `mask` (CUDA's member mask) and waits until every named lane
// has arrived with the same mask and kind. The view stays valid until WarpDepart().
WarpGroupView WarpArrive(uint32_t mask, CollectiveKind kind, const void* data, size_t bytes,
                         std::source_location where);
void WarpDepart(const WarpGroupView& view);

// __syncthreads(): waits for every thread of the block that has not exited.
void BlockBarrier(std::source_location where);

// Shared memory of the current block (poisoned with 0xFF at block start). `site` identifies the
// declaration: every thread of a block gets the same address for the same site.
void* StaticShared(const void* site, size_t bytes, size_t alignment, std::source_location where);
void* DynamicShared();
size_t DynamicSharedBytes();

// cp.async emulation: the destination is poisoned at issue and written only when a wait retires
// the copy's group (so a missing wait reads poison, not data). Per emulated thread.
void AsyncCopyIssue(void* shared_destination, const void* global_source, size_t bytes);
void AsyncCopyCommit();
// Completes every committed group except the newest `pending_allowed`.
void AsyncCopyWait(int pending_allowed);

// ptx::GridDependencyWait: marks the current thread as having waited (emulator.h's
// LaunchConfig::dependent check).
void GridDependencyWait();

// Reports a kernel bug from the current thread: the launch stops and returns INTERNAL.
[[noreturn]] void Fail(const std::string& message);

int CurrentLane();
int CurrentLinearThread();

}  // namespace detail
}  // namespace tessera::simt
