// DeviceMemory and HostMemory: one allocation on a DeviceRuntime (device memory, or host memory
// the device copies to and from: pinned on cuda), freed when the owner goes away (move-only).
// Owned by whoever holds it; the runtime must outlive it. Step/loader thread only, as the runtime.
#pragma once

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "kernels/device/device_runtime.h"

namespace tessera::device {
namespace detail {

// Side: a struct with static Allocate(runtime, bytes) -> StatusOr<void*> and Free(runtime, p).
template <class Side>
class RuntimeAllocation {
 public:
  RuntimeAllocation() = default;
  RuntimeAllocation(RuntimeAllocation&& other) noexcept { *this = std::move(other); }
  RuntimeAllocation& operator=(RuntimeAllocation&& other) noexcept {
    Reset();
    runtime_ = std::exchange(other.runtime_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    return *this;
  }
  RuntimeAllocation(const RuntimeAllocation&) = delete;
  RuntimeAllocation& operator=(const RuntimeAllocation&) = delete;
  ~RuntimeAllocation() { Reset(); }

  // RESOURCE_EXHAUSTED (or the runtime's error) naming the size when there is too little.
  static absl::StatusOr<RuntimeAllocation> Allocate(DeviceRuntime& runtime, size_t bytes) {
    absl::StatusOr<void*> data = Side::Allocate(runtime, bytes);
    if (!data.ok()) return data.status();
    RuntimeAllocation memory;
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
    if (data_ != nullptr) Side::Free(*runtime_, data_);
    data_ = nullptr;
  }

  DeviceRuntime* runtime_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceSide {
  static absl::StatusOr<void*> Allocate(DeviceRuntime& r, size_t bytes) {
    return r.Allocate(bytes);
  }
  static void Free(DeviceRuntime& r, void* pointer) { r.Free(pointer); }
};
struct HostSide {
  static absl::StatusOr<void*> Allocate(DeviceRuntime& r, size_t bytes) {
    return r.AllocateHost(bytes);
  }
  static void Free(DeviceRuntime& r, void* pointer) { r.FreeHost(pointer); }
};

}  // namespace detail

using DeviceMemory = detail::RuntimeAllocation<detail::DeviceSide>;
using HostMemory = detail::RuntimeAllocation<detail::HostSide>;

}  // namespace tessera::device
