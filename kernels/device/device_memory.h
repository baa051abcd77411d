// DeviceMemory: one allocation on a DeviceRuntime, freed when the owner goes away (move-only).
// Owned by whoever holds it; the runtime must outlive it. Step/loader thread only, as the runtime.
#pragma once

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "kernels/device/device_runtime.h"

namespace tessera::device {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(DeviceMemory&& other) noexcept { *this = std::move(other); }
  DeviceMemory& operator=(DeviceMemory&& other) noexcept {
    Reset();
    runtime_ = std::exchange(other.runtime_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { Reset(); }

  // RESOURCE_EXHAUSTED (or the runtime's error) naming the size when the device has too little.
  static absl::StatusOr<DeviceMemory> Allocate(DeviceRuntime& runtime, size_t bytes) {
    absl::StatusOr<void*> data = runtime.Allocate(bytes);
    if (!data.ok()) return data.status();
    DeviceMemory memory;
    memory.runtime_ = &runtime;
    memory.data_ = *data;
    memory.bytes_ = bytes;
    return memory;
  }

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void Reset() {
    if (data_ != nullptr) runtime_->Free(data_);
    data_ = nullptr;
  }

  DeviceRuntime* runtime_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tessera::device
