#include "kernels/simt/emulator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kernels/simt/block_run.h"
#include "kernels/simt/thread_context.h"

namespace tessera::simt {

thread_local ThreadCoordinates current_coordinates;

namespace {

absl::Status ValidateConfig(const LaunchConfig& config) {
  const dim3& b = config.block;
  const dim3& g = config.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || b.z > 64) {
    return absl::InvalidArgumentError(absl::StrCat("simt: invalid block (", b.x, ",", b.y, ",",
                                                   b.z, "): 1..1024 threads, z <= 64"));
  }
  if (uint64_t{g.x} * g.y * g.z == 0 || g.y > 65535 || g.z > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("simt: invalid grid (", g.x, ",", g.y, ",", g.z, ")"));
  }
  if (config.shared_bytes_limit > kMaxSharedBytesPerBlock) {
    return absl::InvalidArgumentError(absl::StrCat("simt: a shared memory limit of ",
                                                   config.shared_bytes_limit, " bytes exceeds ",
                                                   kMaxSharedBytesPerBlock));
  }
  if (config.dynamic_shared_bytes > config.shared_bytes_limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simt: ", config.dynamic_shared_bytes, " bytes of dynamic shared memory exceed the "
        "kernel's limit of ", config.shared_bytes_limit, " (above ", kDefaultSharedBytesPerBlock,
        " a kernel must opt in, as cudaFuncAttributeMaxDynamicSharedMemorySize)"));
  }
  return absl::OkStatus();
}

// The order blocks run in, following the schedule (real GPUs give no order between blocks).
std::vector<uint64_t> BlockOrder(const LaunchConfig& config) {
  std::vector<uint64_t> order(uint64_t{config.grid.x} * config.grid.y * config.grid.z);
  std::iota(order.begin(), order.end(), 0);
  if (config.schedule.kind == ScheduleKind::kReverse) std::reverse(order.begin(), order.end());
  if (config.schedule.kind == ScheduleKind::kRandom) {
    std::mt19937_64 rng(config.schedule.seed ^ 0x9E3779B97F4A7C15ull);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

detail::BlockRun& Block() {
  if (detail::current_block == nullptr) {
    std::fprintf(stderr, "simt: device function called outside a kernel launch\n");
    std::abort();
  }
  return *detail::current_block;
}

}  // namespace

absl::Status LaunchErased(const LaunchConfig& config, const std::function<void()>& body) {
  if (absl::Status valid = ValidateConfig(config); !valid.ok()) return valid;
  const ThreadCoordinates outer = current_coordinates;
  detail::BlockRun block(config, body);
  absl::Status status;
  for (uint64_t linear : BlockOrder(config)) {
    const uint3 index{static_cast<unsigned>(linear % config.grid.x),
                      static_cast<unsigned>((linear / config.grid.x) % config.grid.y),
                      static_cast<unsigned>(linear / (uint64_t{config.grid.x} * config.grid.y))};
    status = block.Run(index);
    if (!status.ok()) break;
  }
  current_coordinates = outer;
  return status;
}

namespace detail {

WarpGroupView WarpArrive(uint32_t mask, CollectiveKind kind, const void* data, size_t bytes,
                         std::source_location where) {
  return Block().WarpArrive(mask, kind, data, bytes, where);
}

void WarpDepart(const WarpGroupView& view) { Block().WarpDepart(view); }

void BlockBarrier(std::source_location where) { Block().Barrier(where); }

void* StaticShared(const void* site, size_t bytes, size_t alignment, std::source_location where) {
  absl::StatusOr<void*> memory = Block().arena().Static(site, bytes, alignment);
  if (!memory.ok()) {
    Fail(absl::StrCat("shared memory declared at ", where.file_name(), ":", where.line(), ": ",
                      memory.status().message()));
  }
  return *memory;
}

void* DynamicShared() { return Block().arena().Dynamic(); }
size_t DynamicSharedBytes() { return Block().arena().dynamic_bytes(); }

void AsyncCopyIssue(void* shared_destination, const void* global_source, size_t bytes) {
  std::memset(shared_destination, 0xFF, bytes);
  Block().current().async_copies.push_back({shared_destination, global_source, bytes, -1});
}

void AsyncCopyCommit() {
  BlockRun& block = Block();
  EmulatedThread& thread = block.current();
  for (AsyncCopy& copy : thread.async_copies) {
    if (copy.group < 0) copy.group = thread.committed_groups;
  }
  ++thread.committed_groups;
}

void AsyncCopyWait(int pending_allowed) {
  EmulatedThread& thread = Block().current();
  const int retire_below = thread.committed_groups - pending_allowed;
  std::erase_if(thread.async_copies, [&](const AsyncCopy& copy) {
    if (copy.group < 0 || copy.group >= retire_below) return false;
    std::memcpy(copy.destination, copy.source, copy.bytes);
    return true;
  });
}

void GridDependencyWait() { Block().current().waited_on_grid = true; }

void Fail(const std::string& message) { Block().Fail(message); }

int CurrentLane() { return Block().current().linear % 32; }
int CurrentLinearThread() { return Block().current().linear; }

}  // namespace detail
}  // namespace tessera::simt
