// 16-byte vector loads and stores of bf16 / f16 / f32 arrays, unpacked to and packed from f32:
// one 128-bit memory instruction per thread for 8 halves or 4 floats. Compiled by nvcc and g++.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"

namespace tessera::cuda {

// Elements of T in 16 bytes.
template <typename T>
inline constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

__host__ __device__ __forceinline__ bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

__device__ __forceinline__ unsigned Bits16(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
__device__ __forceinline__ unsigned Bits16(__half x) { return __half_as_ushort(x); }

// The T held in the low (high = false) or high half of a 32-bit word.
template <typename T>
__device__ __forceinline__ float HalfOfWord(unsigned word, bool high) {
  const auto bits = static_cast<unsigned short>(high ? word >> 16 : word);
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(__ushort_as_half(bits));
  } else {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  }
}

// v[0 .. kVec16<T>) <- p[0 .. kVec16<T>). Precondition: p is 16-byte aligned.
template <typename T>
__device__ __forceinline__ void Load16(const T* p, float* v) {
  const uint4 w = *reinterpret_cast<const uint4*>(p);
  const unsigned words[4] = {w.x, w.y, w.z, w.w};
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(T) == 4) {
      v[k] = __uint_as_float(words[k]);
    } else {
      v[2 * k] = HalfOfWord<T>(words[k], false);
      v[2 * k + 1] = HalfOfWord<T>(words[k], true);
    }
  }
}

// p[0 .. kVec16<T>) <- v rounded to T. Precondition: p is 16-byte aligned.
template <typename T>
__device__ __forceinline__ void Store16(T* p, const float* v) {
  unsigned w[4];
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(T) == 4) {
      w[k] = __float_as_uint(v[k]);
    } else {
      w[k] = Bits16(FromFloat<T>(v[2 * k])) | (Bits16(FromFloat<T>(v[2 * k + 1])) << 16);
    }
  }
  *reinterpret_cast<uint4*>(p) = uint4{w[0], w[1], w[2], w[3]};
}

}  // namespace tessera::cuda
