// Host-side helpers for kernel tests: random inputs and the bf16/f16/f32 conversions the
// references need (CUDA's own host conversions).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace tessera::simt {

// Bit-for-bit equality (for results that must not differ in a single bit; NaN-safe).
template <typename T>
bool SameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

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
