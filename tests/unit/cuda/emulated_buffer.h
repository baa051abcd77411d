// Device buffers for emulated kernel tests: memory from the emulated allocator (guard page at
// the end), filled from and read back into host vectors. Include kernel_test_env.h instead.
#pragma once

#include <cstring>
#include <span>
#include <vector>

#include "kernels/simt/device_memory.h"
#include "tests/unit/cuda/host_conversions.h"

namespace tessera::simt {

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    pointer_ = static_cast<T*>(*AllocateDevice(count * sizeof(T)));
  }
  explicit DeviceBuffer(std::span<const T> values) : DeviceBuffer(values.size()) {
    if (!values.empty()) std::memcpy(pointer_, values.data(), values.size_bytes());
  }
  ~DeviceBuffer() { FreeDevice(pointer_); }
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
