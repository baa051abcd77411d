// Test helpers for emulated kernels: device buffers from the emulated allocator (guard page at
// the end), filled from and read back into host vectors, and the number-format conversions the
// references need.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "kernels/simt/device_memory.h"

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

inline std::vector<float> RandomFloats(size_t count, std::mt19937& rng, float low = -1.0f,
                                       float high = 1.0f) {
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

template <typename T>
T FloatTo(float x);
template <>
inline float FloatTo<float>(float x) { return x; }
template <>
inline __nv_bfloat16 FloatTo<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
inline __half FloatTo<__half>(float x) { return __float2half_rn(x); }

inline float AsFloat(float x) { return x; }
inline float AsFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float AsFloat(__half x) { return __half2float(x); }

template <typename T>
std::vector<T> Convert(std::span<const float> values) {
  std::vector<T> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = FloatTo<T>(values[i]);
  return out;
}

// The f32 values a T-typed vector holds (what the kernel actually reads).
template <typename T>
std::vector<float> ToFloats(std::span<const T> values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = AsFloat(values[i]);
  return out;
}

}  // namespace tessera::simt
