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

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Butterfly reduction over the full warp; every lane gets the result.
template <typename Op>
__device__ __forceinline__ float WarpReduce(float value, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = op(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
  }
  return value;
}

__device__ __forceinline__ float WarpSum(float value) { return WarpReduce(value, SumOp{}); }
__device__ __forceinline__ float WarpMax(float value) { return WarpReduce(value, MaxOp{}); }

// Reduction over the whole block, returned to every thread. Preconditions: blockDim.x is a
// multiple of 32 (<= 1024), blockDim.y == blockDim.z == 1, every thread of the block calls it,
// and `scratch` holds 32 floats of shared memory not in use by the caller until this returns.
template <typename Op>
__device__ __forceinline__ float BlockReduce(float value, float* scratch, float identity, Op op) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  value = WarpReduce(value, op);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = lane < num_warps ? scratch[lane] : identity;
  total = WarpReduce(total, op);
  __syncthreads();  // scratch may be reused by the caller after this
  return total;
}

__device__ __forceinline__ float BlockSum(float value, float* scratch) {
  return BlockReduce(value, scratch, 0.0f, SumOp{});
}
__device__ __forceinline__ float BlockMax(float value, float* scratch) {
  return BlockReduce(value, scratch, -INFINITY, MaxOp{});
}

}  // namespace tessera::cuda
