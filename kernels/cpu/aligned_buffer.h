// Cache-line (64-byte) aligned std::vector, for activation, KV and dequantized-weight buffers.
// The kernels accept any alignment, but 64-byte loads that straddle two cache lines cost up to
// 30% in the matmul (measured; docs/perf/cpu-kernels.md), so the model runner should allocate its
// persistent buffers with this type. Rows of k floats stay aligned when k is a multiple of 16.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace tessera::kernels::cpu {

inline constexpr size_t kCacheLineBytes = 64;

template <typename T>
struct CacheAlignedAllocator {
  using value_type = T;

  CacheAlignedAllocator() = default;
  template <typename U>
  explicit CacheAlignedAllocator(const CacheAlignedAllocator<U>&) {}

  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{kCacheLineBytes}); }

  template <typename U>
  bool operator==(const CacheAlignedAllocator<U>&) const {
    return true;
  }
};

template <typename T>
using AlignedVector = std::vector<T, CacheAlignedAllocator<T>>;

}  // namespace tessera::kernels::cpu
