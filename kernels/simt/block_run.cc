#include "kernels/simt/block_run.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::simt::detail {

thread_local BlockRun* current_block = nullptr;

namespace {

namespace fctx = boost::context::detail;

std::string Site(std::source_location where) {
  const char* file = where.file_name();
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  return absl::StrCat(file, ":", where.line());
}

std::string Coordinates(const uint3& index) {
  return absl::StrCat("(", index.x, ",", index.y, ",", index.z, ")");
}

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

const char* CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kShuffle: return "__shfl_sync";
    case CollectiveKind::kBallot: return "__ballot_sync";
    case CollectiveKind::kAny: return "__any_sync";
    case CollectiveKind::kAll: return "__all_sync";
    case CollectiveKind::kSyncWarp: return "__syncwarp";
    case CollectiveKind::kMatrix: return "a warp-wide matrix instruction";
  }
  return "?";
}

BlockRun::BlockRun(const LaunchConfig& config, const std::function<void()>& body)
    : config_(config),
      body_(body),
      num_threads_(static_cast<int>(config.block.x * config.block.y * config.block.z)),
      arena_(config.dynamic_shared_bytes, config.shared_bytes_limit),
      threads_(num_threads_),
      warp_groups_((num_threads_ + 31) / 32),
      rng_(config.schedule.seed) {
  const size_t page = PageSize();
  stack_stride_ = (config.stack_bytes + page - 1) / page * page + page;
  stacks_bytes_ = stack_stride_ * static_cast<size_t>(num_threads_);
  void* mapping = mmap(nullptr, stacks_bytes_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) {
    std::fprintf(stderr, "simt: cannot map %zu bytes of fiber stacks\n", stacks_bytes_);
    std::abort();
  }
  stacks_ = static_cast<char*>(mapping);
  for (int t = 0; t < num_threads_; ++t) {
    mprotect(stacks_ + static_cast<size_t>(t) * stack_stride_, page, PROT_NONE);
  }
}

BlockRun::~BlockRun() { munmap(stacks_, stacks_bytes_); }

void BlockRun::FiberEntry(fctx::transfer_t transfer) {
  BlockRun* block = static_cast<BlockRun*>(transfer.data);
  block->scheduler_ = transfer.fctx;
  block->body_();
  block->OnExit(*block->current_);
  fctx::jump_fcontext(block->scheduler_, nullptr);
  std::abort();  // an exited thread is never resumed
}

void BlockRun::Yield() {
  fctx::transfer_t back = fctx::jump_fcontext(scheduler_, nullptr);
  scheduler_ = back.fctx;
}

absl::Status BlockRun::Run(uint3 block_idx) {
  arena_.PoisonForBlock();
  const dim3 dim = config_.block;
  const size_t page = PageSize();
  std::vector<int> all(num_threads_);
  for (int t = 0; t < num_threads_; ++t) {
    EmulatedThread& thread = threads_[t];
    thread.linear = t;
    thread.index = uint3{t % dim.x, (t / dim.x) % dim.y, t / (dim.x * dim.y)};
    thread.state = ThreadState::kRunnable;
    thread.group = nullptr;
    thread.async_copies.clear();
    thread.committed_groups = 0;
    thread.waited_on_grid = false;
    char* top = stacks_ + static_cast<size_t>(t) * stack_stride_ + stack_stride_;
    thread.context = fctx::make_fcontext(top, stack_stride_ - page, &BlockRun::FiberEntry);
    all[t] = t;
  }
  for (auto& groups : warp_groups_) groups.clear();
  at_barrier_.clear();
  ready_.clear();
  error_.reset();
  live_ = num_threads_;
  current_coordinates.block_idx = block_idx;
  current_coordinates.block_dim = config_.block;
  current_coordinates.grid_dim = config_.grid;
  Release(std::move(all));

  BlockRun* const outer = current_block;
  current_block = this;
  while (!error_ && !ready_.empty()) {
    current_ = &threads_[PickNext()];
    current_coordinates.thread_idx = current_->index;
    fctx::transfer_t back = fctx::jump_fcontext(current_->context, this);
    current_->context = back.fctx;
  }
  current_block = outer;
  current_ = nullptr;
  if (!error_ && live_ > 0) error_ = DescribeDeadlock();
  if (!error_) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("simt: block ", Coordinates(block_idx), ": ", *error_));
}

int BlockRun::PickNext() {
  if (config_.schedule.kind == ScheduleKind::kRandom && ready_.size() > 1) {
    std::uniform_int_distribution<size_t> pick(0, ready_.size() - 1);
    const size_t at = pick(rng_);
    std::swap(ready_[at], ready_.front());
  }
  if (config_.schedule.kind == ScheduleKind::kLowestFirst && ready_.size() > 1) {
    const auto lowest = std::min_element(ready_.begin(), ready_.end());
    std::rotate(ready_.begin(), lowest, lowest + 1);  // the rest keep their order
  }
  const int next = ready_.front();
  ready_.pop_front();
  return next;
}

// Makes `ids` runnable, queued in the schedule's order.
void BlockRun::Release(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  if (config_.schedule.kind == ScheduleKind::kReverse) std::reverse(ids.begin(), ids.end());
  for (int id : ids) {
    threads_[id].state = ThreadState::kRunnable;
    threads_[id].group = nullptr;
    ready_.push_back(id);
  }
}

void BlockRun::Fail(const std::string& message) {
  error_ = absl::StrCat(message, " [thread ", Coordinates(current_->index), "]");
  fctx::jump_fcontext(scheduler_, nullptr);
  std::abort();  // a failed block is never resumed
}

void BlockRun::Barrier(std::source_location where) {
  if (!at_barrier_.empty() && (where.line() != barrier_site_.line() ||
                               std::strcmp(where.file_name(), barrier_site_.file_name()) != 0)) {
    Fail(absl::StrCat("divergent __syncthreads: this thread reached the barrier at ", Site(where),
                      " while ", at_barrier_.size(), " thread(s) of the block wait at ",
                      Site(barrier_site_)));
  }
  if (at_barrier_.empty()) barrier_site_ = where;
  current_->state = ThreadState::kAtBarrier;
  at_barrier_.push_back(current_->linear);
  MaybeReleaseBarrier();
  Yield();
}

void BlockRun::MaybeReleaseBarrier() {
  if (at_barrier_.empty() || static_cast<int>(at_barrier_.size()) != live_) return;
  std::vector<int> waiting;
  waiting.swap(at_barrier_);
  Release(std::move(waiting));
}

void BlockRun::OnExit(EmulatedThread& thread) {
  thread.state = ThreadState::kExited;
  --live_;
  if (config_.dependent && !thread.waited_on_grid && !error_) {
    Fail(absl::StrFormat("thread %d of a dependent launch exited without "
                         "ptx::GridDependencyWait (LaunchShape::dependent promises it)",
                         thread.linear));
  }
  const int warp = thread.linear / 32;
  const uint32_t bit = 1u << (thread.linear % 32);
  for (const WarpGroup& group : warp_groups_[warp]) {
    if (group.collecting && (group.mask & bit) && !(group.arrived & bit)) {
      Fail(absl::StrFormat("lane %d exited while lanes 0x%08x wait for it in %s at %s "
                           "(mask 0x%08x)",
                           thread.linear % 32, group.arrived, CollectiveName(group.kind),
                           Site(group.site), group.mask));
    }
  }
  MaybeReleaseBarrier();
}

uint32_t BlockRun::ExistingLanes(int warp) const {
  const int lanes = std::min(32, num_threads_ - warp * 32);
  return lanes == 32 ? 0xFFFFFFFFu : ((1u << lanes) - 1);
}

uint32_t BlockRun::ExitedLanes(int warp) const {
  uint32_t exited = 0;
  const int first = warp * 32;
  for (int lane = 0; lane < 32 && first + lane < num_threads_; ++lane) {
    if (threads_[first + lane].state == ThreadState::kExited) exited |= 1u << lane;
  }
  return exited;
}

WarpGroup& BlockRun::GroupFor(int warp, uint32_t mask, CollectiveKind kind,
                              std::source_location where) {
  std::deque<WarpGroup>& groups = warp_groups_[warp];
  WarpGroup* free_slot = nullptr;
  for (WarpGroup& group : groups) {
    if (!group.in_use) {
      if (!free_slot) free_slot = &group;
      continue;
    }
    if (!group.collecting || !(group.mask & mask)) continue;
    if (group.mask != mask || group.kind != kind) {
      Fail(absl::StrFormat("mismatched warp collective: lane %d reached %s at %s with mask "
                           "0x%08x while lanes 0x%08x wait in %s at %s with mask 0x%08x",
                           current_->linear % 32, CollectiveName(kind), Site(where), mask,
                           group.arrived, CollectiveName(group.kind), Site(group.site),
                           group.mask));
    }
    return group;
  }
  WarpGroup& group = free_slot ? *free_slot : groups.emplace_back();
  group.mask = mask;
  group.arrived = 0;
  group.departed = 0;
  group.kind = kind;
  group.site = where;
  group.collecting = true;
  group.in_use = true;
  return group;
}

WarpGroupView BlockRun::WarpArrive(uint32_t mask, CollectiveKind kind, const void* data,
                                   size_t bytes, std::source_location where) {
  const int lane = current_->linear % 32;
  const int warp = current_->linear / 32;
  const uint32_t bit = 1u << lane;
  const char* name = CollectiveName(kind);
  if (!(mask & bit)) {
    Fail(absl::StrFormat("%s at %s: lane %d passes mask 0x%08x, which does not name itself",
                         name, Site(where), lane, mask));
  }
  if (const uint32_t missing = mask & ~ExistingLanes(warp)) {
    Fail(absl::StrFormat("%s at %s: mask 0x%08x names lanes 0x%08x that this block does not have",
                         name, Site(where), mask, missing));
  }
  if (const uint32_t exited = mask & ExitedLanes(warp)) {
    Fail(absl::StrFormat("%s at %s: mask 0x%08x names lanes 0x%08x that already exited", name,
                         Site(where), mask, exited));
  }
  WarpGroup& group = GroupFor(warp, mask, kind, where);
  if (bytes > 0) std::memcpy(&group.payload[lane], data, bytes);
  group.arrived |= bit;
  current_->state = ThreadState::kInCollective;
  current_->group = &group;
  if (group.arrived == group.mask) {
    group.collecting = false;
    std::vector<int> lanes;
    for (uint32_t m = group.mask; m; m &= m - 1) lanes.push_back(warp * 32 + std::countr_zero(m));
    Release(std::move(lanes));
  }
  Yield();
  return {group.payload.data(), group.mask, lane, &group};
}

void BlockRun::WarpDepart(const WarpGroupView& view) {
  WarpGroup& group = *const_cast<WarpGroup*>(static_cast<const WarpGroup*>(view.group));
  group.departed |= 1u << view.self_lane;
  if (group.departed == group.mask) group.in_use = false;
}

std::string BlockRun::DescribeDeadlock() const {
  std::string report = absl::StrCat("deadlock: ", live_, " thread(s) can never continue;");
  if (!at_barrier_.empty()) {
    absl::StrAppend(&report, " ", at_barrier_.size(), " wait at __syncthreads (",
                    Site(barrier_site_), ");");
  }
  for (size_t warp = 0; warp < warp_groups_.size(); ++warp) {
    for (const WarpGroup& group : warp_groups_[warp]) {
      if (!group.collecting) continue;
      absl::StrAppend(&report, absl::StrFormat(
          " warp %d: lanes 0x%08x wait in %s at %s for lanes 0x%08x (mask 0x%08x);", warp,
          group.arrived, CollectiveName(group.kind), Site(group.site),
          group.mask & ~group.arrived, group.mask));
    }
  }
  return report;
}

}  // namespace tessera::simt::detail
