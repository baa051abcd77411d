#include "kernels/cpu/thread_pool.h"

#include <chrono>

#include "common/util/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TESSERA_CPU_RELAX() _mm_pause()
#else
#define TESSERA_CPU_RELAX() std::this_thread::yield()
#endif

namespace tessera::kernels::cpu {
namespace {

// The pool whose range the current thread is running (to run nested ParallelFor inline).
thread_local const ThreadPool* current_pool = nullptr;

// Spins until done() or about kSpinMicros elapsed; returns done().
template <typename Done>
bool SpinUntil(Done done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(ThreadPool::kSpinMicros);
  while (!done()) {
    for (int i = 0; i < 16; ++i) TESSERA_CPU_RELAX();
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
  return true;
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads) {
  TESSERA_CHECK(num_threads >= 1, "ThreadPool needs at least one thread");
  workers_.reserve(static_cast<size_t>(num_threads - 1));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

int64_t ThreadPool::NumRanges(int64_t n) const {
  if (num_threads_ == 1) return n > 0 ? 1 : 0;
  const int64_t ranges = static_cast<int64_t>(num_threads_) * kRangesPerThread;
  return n < ranges ? n : ranges;
}

void ThreadPool::StaticRange(int64_t n, int64_t num_ranges, int64_t r, int64_t* begin,
                             int64_t* end) {
  // 128-bit products: n * r may overflow int64 for huge n.
  *begin = static_cast<int64_t>(static_cast<__int128>(n) * r / num_ranges);
  *end = static_cast<int64_t>(static_cast<__int128>(n) * (r + 1) / num_ranges);
}

void ThreadPool::RunClaimedRanges(uint32_t generation) {
  const ThreadPool* const outer_pool = current_pool;
  current_pool = this;
  uint64_t state = claim_.load(std::memory_order_acquire);
  while (true) {
    // Decide from the claim word alone: job_* may already describe a newer job.
    if (static_cast<uint32_t>(state >> 32) != generation) break;
    const int64_t range = static_cast<int64_t>(state & 0xFFFFu);
    if (range >= static_cast<int64_t>((state >> 16) & 0xFFFFu)) break;
    if (!claim_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel)) continue;
    int64_t begin = 0;
    int64_t end = 0;
    StaticRange(job_n_, job_ranges_, range, &begin, &end);
    (*job_)(begin, end);
    if (ranges_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == job_ranges_) {
      ranges_done_.notify_one();
    }
    state = claim_.load(std::memory_order_acquire);
  }
  current_pool = outer_pool;
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  while (true) {
    SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; });
    uint32_t generation = generation_.load(std::memory_order_acquire);
    while (generation == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      generation = generation_.load(std::memory_order_acquire);
    }
    seen = generation;
    if (stop_.load(std::memory_order_acquire)) return;
    RunClaimedRanges(generation);
  }
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  TESSERA_CHECK(n >= 0, "ParallelFor needs n >= 0");
  const int64_t num_ranges = NumRanges(n);
  if (num_ranges == 0) return;
  if (num_ranges == 1 || current_pool == this) {
    for (int64_t r = 0; r < num_ranges; ++r) {  // same ranges, run inline
      int64_t begin = 0;
      int64_t end = 0;
      StaticRange(n, num_ranges, r, &begin, &end);
      fn(begin, end);
    }
    return;
  }
  TESSERA_CHECK(num_ranges <= 0xFFFF, "ParallelFor: too many ranges (thread count too large)");
  TESSERA_CHECK(!in_use_.exchange(true, std::memory_order_acquire),
                "ThreadPool::ParallelFor called concurrently from two threads");
  job_ = &fn;
  job_n_ = n;
  job_ranges_ = num_ranges;
  ranges_done_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  const uint64_t claim =
      (static_cast<uint64_t>(generation) << 32) | (static_cast<uint64_t>(num_ranges) << 16);
  claim_.store(claim, std::memory_order_release);
  generation_.store(generation, std::memory_order_release);
  generation_.notify_all();

  RunClaimedRanges(generation);
  // Ranges claimed by workers may still be running.
  auto all_done = [&] { return ranges_done_.load(std::memory_order_acquire) == num_ranges; };
  if (!SpinUntil(all_done)) {
    for (int64_t done = ranges_done_.load(std::memory_order_acquire); done != num_ranges;
         done = ranges_done_.load(std::memory_order_acquire)) {
      ranges_done_.wait(done, std::memory_order_acquire);
    }
  }
  job_ = nullptr;
  in_use_.store(false, std::memory_order_release);
}

}  // namespace tessera::kernels::cpu
