// Small device helpers every kernel shares: number-format conversions to and from f32, and
// warp/block sum and max reductions (f32 accumulation). Compiled by nvcc and by g++ (emulator).
#pragma once

#include "kernels/cuda/device_compat.cuh"

namespace tessera::cuda {

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) { return __float2half_rn(x); }

__device__ __forceinline__ float WarpSum(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  }
  return value;
}

__device__ __forceinline__ float WarpMax(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
  }
  return value;
}

// Sum over the whole block, returned to every thread. Preconditions: blockDim.x is a multiple
// of 32 (<= 1024), blockDim.y == blockDim.z == 1, every thread of the block calls it, and
// `scratch` holds 32 floats of shared memory not in use by the caller until this returns.
__device__ __forceinline__ float BlockSum(float value, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  value = WarpSum(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = lane < num_warps ? scratch[lane] : 0.0f;
  total = WarpSum(total);
  __syncthreads();  // scratch may be reused by the caller after this
  return total;
}

// Max over the whole block; same preconditions as BlockSum.
__device__ __forceinline__ float BlockMax(float value, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  value = WarpMax(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = lane < num_warps ? scratch[lane] : -INFINITY;
  total = WarpMax(total);
  __syncthreads();
  return total;
}

}  // namespace tessera::cuda
