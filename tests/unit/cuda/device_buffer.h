// Device buffers for kernel tests, filled from and read back into host vectors: on the emulator
// memory from the emulated allocator (guard page at the end), on a GPU managed memory (the host
// indexes it once a launch has synchronised). Included through kernel_test_env.h.
//
// Managed memory is capped: one buffer at most kMaxManagedBufferBytes and all live buffers of the
// process at most kMaxManagedLiveBytes. Managed allocations may exceed the card's free memory and
// then page back and forth, which can stall a GPU shared with other jobs for minutes; a kernel
// test needs a few MiB. Going over a cap, or a failed allocation, prints what was asked and why
// it was refused, then aborts the test binary.
#pragma once

#include <cstring>
#include <span>
#include <string>
#include <vector>

#if TESSERA_KERNEL_TEST_ON_GPU
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#else
#include "kernels/simt/device_memory.h"
#endif
#include "tests/unit/cuda/host_conversions.h"

namespace tessera::simt {

#if TESSERA_KERNEL_TEST_ON_GPU
inline constexpr size_t kMaxManagedBufferBytes = size_t{256} << 20;
inline constexpr size_t kMaxManagedLiveBytes = size_t{1} << 30;

// Bytes of managed memory this process's DeviceBuffers hold now.
inline size_t& LiveManagedBytes() {
  static size_t bytes = 0;
  return bytes;
}

[[noreturn]] inline void AbortAllocation(size_t bytes, const char* why) {
  std::fprintf(stderr,
               "DeviceBuffer: cannot allocate %zu bytes of managed memory (%zu bytes live): %s\n",
               bytes, LiveManagedBytes(), why);
  std::fflush(stderr);
  std::abort();
}

inline void* TestAllocate(size_t bytes) {
  if (bytes > kMaxManagedBufferBytes) AbortAllocation(bytes, "over the 256 MiB per-buffer cap");
  if (LiveManagedBytes() + bytes > kMaxManagedLiveBytes) {
    AbortAllocation(bytes, "over the 1 GiB cap on live managed memory");
  }
  void* pointer = nullptr;
  const cudaError_t error = cudaMallocManaged(&pointer, std::max<size_t>(bytes, 1));
  if (error != cudaSuccess) {
    const std::string why = std::string("cudaMallocManaged: ") + cudaGetErrorName(error) + " (" +
                            cudaGetErrorString(error) + ")";
    AbortAllocation(bytes, why.c_str());
  }
  LiveManagedBytes() += bytes;
  return pointer;
}
inline void TestFree(void* pointer, size_t bytes) {
  cudaFree(pointer);
  LiveManagedBytes() -= bytes;
}
#else
inline void* TestAllocate(size_t bytes) { return *AllocateDevice(bytes); }
inline void TestFree(void* pointer, size_t) { FreeDevice(pointer); }
#endif

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    pointer_ = static_cast<T*>(TestAllocate(count * sizeof(T)));
  }
  explicit DeviceBuffer(std::span<const T> values) : DeviceBuffer(values.size()) {
    if (!values.empty()) std::memcpy(pointer_, values.data(), values.size_bytes());
  }
  ~DeviceBuffer() { TestFree(pointer_, count_ * sizeof(T)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() { return pointer_; }
  const T* get() const { return pointer_; }
  T& operator[](size_t i) { return pointer_[i]; }
  size_t size() const { return count_; }
  std::vector<T> ToHost() const { return std::vector<T>(pointer_, pointer_ + count_); }

 private:
  T* pointer_;
  size_t count_;
};

}  // namespace tessera::simt
