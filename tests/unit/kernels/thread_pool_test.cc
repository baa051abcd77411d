#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::kernels::cpu {
namespace {

TEST(CpuThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 7, 16, 97, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
        ASSERT_LT(begin, end);
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(CpuThreadPoolTest, StaticRangesAreContiguousAndBalanced) {
  for (int64_t num_ranges : {1, 2, 3, 5, 8}) {
    for (int64_t n : {1, 4, 10, 97}) {
      if (num_ranges > n) continue;
      int64_t expected_begin = 0;
      for (int64_t r = 0; r < num_ranges; ++r) {
        int64_t begin = 0, end = 0;
        ThreadPool::StaticRange(n, num_ranges, r, &begin, &end);
        EXPECT_EQ(begin, expected_begin);
        EXPECT_LE(end - begin, n / num_ranges + 1);
        EXPECT_GE(end - begin, n / num_ranges);
        expected_begin = end;
      }
      EXPECT_EQ(expected_begin, n);
    }
  }
}

// The (begin, end) pairs are a function of n and the pool size only, whatever the schedule.
TEST(CpuThreadPoolTest, RangesAreDeterministic) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 30, 1000}) {
      std::set<std::pair<int64_t, int64_t>> first, second;
      std::mutex mu;
      for (auto* ranges : {&first, &second}) {
        pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
          std::lock_guard<std::mutex> lock(mu);
          ranges->insert({begin, end});
        });
      }
      EXPECT_EQ(first, second);
      EXPECT_EQ(static_cast<int64_t>(first.size()), pool.NumRanges(n));
    }
  }
}

// Workers really run ranges (the pool is not silently serial).
TEST(CpuThreadPoolTest, WorkersParticipate) {
  ThreadPool pool(2);
  std::set<std::thread::id> ids;
  std::mutex mu;
  for (int attempt = 0; attempt < 200 && ids.size() < 2; ++attempt) {
    pool.ParallelFor(8, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
  }
  EXPECT_EQ(ids.size(), 2u);
}

TEST(CpuThreadPoolTest, PoolOfOneRunsInline) {
  ThreadPool pool(1);
  std::thread::id id;
  int calls = 0;
  pool.ParallelFor(5, [&](int64_t begin, int64_t end) {
    id = std::this_thread::get_id();
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 5);
    ++calls;
  });
  EXPECT_EQ(calls, 1);  // one range covering everything
  EXPECT_EQ(id, std::this_thread::get_id());
}

TEST(CpuThreadPoolTest, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<int> inner_total{0};
  pool.ParallelFor(2, [&](int64_t begin, int64_t end) {
    pool.ParallelFor(10, [&](int64_t b, int64_t e) { inner_total.fetch_add(int(e - b)); });
  });
  EXPECT_EQ(inner_total.load(), 20);
}

TEST(CpuThreadPoolTest, ManyBackToBackJobs) {
  ThreadPool pool(2);
  int64_t total = 0;
  std::vector<int64_t> partial(2);
  for (int iter = 0; iter < 20000; ++iter) {
    pool.ParallelFor(2, [&](int64_t begin, int64_t end) { partial[begin] = begin + 1; });
    total += partial[0] + partial[1];
  }
  EXPECT_EQ(total, 20000 * 3);
}

TEST(CpuThreadPoolDeathTest, RejectsZeroThreads) {
  EXPECT_DEATH(ThreadPool(0), "at least one thread");
}

}  // namespace
}  // namespace tessera::kernels::cpu
