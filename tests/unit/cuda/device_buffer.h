// Device buffers for kernel tests, filled from and read back into host vectors: on the emulator
// memory from the emulated allocator (guard page at the end), on a GPU managed memory (the host
// indexes it once a launch has synchronised). Included through kernel_test_env.h.
#pragma once

#include <cstring>
#include <span>
#include <vector>

#if TESSERA_KERNEL_TEST_ON_GPU
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#else
#include "kernels/simt/device_memory.h"
#endif
#include "tests/unit/cuda/host_conversions.h"

namespace tessera::simt {

#if TESSERA_KERNEL_TEST_ON_GPU
inline void* TestAllocate(size_t bytes) {
  void* pointer = nullptr;
  if (cudaMallocManaged(&pointer, std::max<size_t>(bytes, 1)) != cudaSuccess) std::abort();
  return pointer;
}
inline void TestFree(void* pointer) { cudaFree(pointer); }
#else
inline void* TestAllocate(size_t bytes) { return *AllocateDevice(bytes); }
inline void TestFree(void* pointer) { FreeDevice(pointer); }
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
  ~DeviceBuffer() { TestFree(pointer_); }
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
