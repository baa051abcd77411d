// Fixed-size pool of worker threads for data-parallel kernels.
//
// ParallelFor splits [0, n) statically into NumRanges(n) contiguous ranges (range r of R is
// [n * r / R, n * (r + 1) / R)), so the (begin, end) pairs fn is called with depend only on n and
// the pool size — never on timing. Which thread runs a range is dynamic: the caller and the
// workers claim ranges in order until none is left. Kernels compute every output element inside
// one range with arithmetic that does not depend on the thread or the range boundaries, so their
// results are bit-identical for any thread count and any schedule. Dynamic claiming keeps a
// descheduled worker (a shared machine, other processes) from stalling the caller: the caller
// runs what the worker has not claimed.
//
// Threading: one thread at a time may call ParallelFor (the model runner's thread); a second
// concurrent caller aborts. A ParallelFor issued from inside a running range runs inline.
// Idle workers spin for about kSpinMicros after each job (cheap back-to-back kernels), then block
// on a futex.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace tessera::kernels::cpu {

class ThreadPool {
 public:
  // Ranges per thread: finer than one per thread so that claiming balances uneven work.
  static constexpr int kRangesPerThread = 4;
  static constexpr int kSpinMicros = 50;

  // Precondition: 1 <= num_threads <= 16383. Starts num_threads - 1 workers; a pool of 1 runs
  // inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();  // joins the workers

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Number of static ranges [0, n) is split into: min(n, num_threads * kRangesPerThread), or 1
  // for a pool of one thread.
  int64_t NumRanges(int64_t n) const;

  // Calls fn(begin, end) once for each static range of [0, n) and returns when all are done.
  // Precondition: n >= 0; fn must not throw.
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn);

  // Range r of [0, n) split into num_ranges.
  static void StaticRange(int64_t n, int64_t num_ranges, int64_t r, int64_t* begin, int64_t* end);

 private:
  void WorkerLoop();
  // Claims and runs ranges of job `generation` until none is left.
  void RunClaimedRanges(uint32_t generation);

  const int num_threads_;
  std::vector<std::thread> workers_;

  // Job state, written by the caller before it publishes a generation (release), read by a
  // participant only after it claimed a range of that generation (acquire).
  const absl::FunctionRef<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_ranges_ = 0;

  // generation << 32 | num_ranges << 16 | next unclaimed range. Claims CAS on it, so a
  // participant that woke up late can never claim a range of a newer job than the one it saw.
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> generation_{0};  // futex word for idle workers
  std::atomic<int64_t> ranges_done_{0};  // futex-waited by the caller
  std::atomic<bool> stop_{false};
  std::atomic<bool> in_use_{false};      // detects concurrent callers
};

}  // namespace tessera::kernels::cpu
