// Shared helpers for the benchmark binaries: seeded random data and process-wide thread pools.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/thread_pool.h"

namespace tessera::bench {

// 64-byte aligned, like the model runner's buffers (kernels/cpu/aligned_buffer.h).
inline kernels::cpu::AlignedVector<float> RandomFloats(size_t n, uint64_t seed, float lo = -1.0f,
                                                       float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  kernels::cpu::AlignedVector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// One pool per thread count, created on first use and kept for the process (benchmarks run
// sequentially on the main thread).
inline kernels::cpu::ThreadPool& Pool(int num_threads) {
  static std::map<int, std::unique_ptr<kernels::cpu::ThreadPool>> pools;
  auto& pool = pools[num_threads];
  if (!pool) pool = std::make_unique<kernels::cpu::ThreadPool>(num_threads);
  return *pool;
}

}  // namespace tessera::bench
