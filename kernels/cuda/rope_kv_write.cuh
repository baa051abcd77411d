// RoPE on q and k, then the KV write, in one launch: the attention step's input half
// (rope.cuh's RotateToken, then kv_write.cuh's WriteTokenKv, per token). Same results, bit for
// bit, as LaunchRope followed by LaunchKvWrite; preconditions of both.
// Design: one block per token; its threads rotate the token's q and k pairs in place, a barrier
// makes the rotated k visible to the whole block, then they copy k and v to the token's slot
// (none for slot -1). Bound (H100): memory, the two kernels' bytes less one pass over k (read
// back from L1/L2); at decode sizes launch-bound, which is what the fusion saves.
#pragma once

#include <cstdint>

#include "kernels/cuda/kv_write.cuh"
#include "kernels/cuda/rope.cuh"

namespace tessera::cuda {

template <typename T, RopeStyle kStyle>
__global__ void __launch_bounds__(kRopeMaxThreads)
    RopeKvWriteKernel(T* __restrict__ q, T* __restrict__ k, const T* __restrict__ v,
                      T* __restrict__ k_pool, T* __restrict__ v_pool,
                      const int32_t* __restrict__ positions,
                      const int32_t* __restrict__ slot_mapping, const float* __restrict__ cos_sin,
                      int max_positions, int num_heads, int num_kv_heads, int head_dim,
                      int rope_dim, bool vectorized) {
  const int token = blockIdx.x;
  RotateToken<T, kStyle>(q, k, token, positions[token], cos_sin, max_positions, num_heads,
                         num_kv_heads, head_dim, rope_dim);
  __syncthreads();  // the rotated k, written by any thread of the block, is read below
  WriteTokenKv(k, v, k_pool, v_pool, slot_mapping, token, num_kv_heads * head_dim, vectorized);
}

template <class Launcher, typename T>
auto LaunchRopeKvWrite(Launcher& launcher, RopeStyle style, T* q, T* k, const T* v, T* k_pool,
                       T* v_pool, const int32_t* positions, const int32_t* slot_mapping,
                       const float* cos_sin, int max_positions, int num_tokens, int num_heads,
                       int num_kv_heads, int head_dim, int rope_dim) {
  const bool vectorized = KvRowVectorized<T>(num_kv_heads * head_dim);
  const LaunchShape shape{dim3(num_tokens), dim3(RopeThreads(num_heads, num_kv_heads, rope_dim)),
                          0};
  if (style == RopeStyle::kNeox) {
    return launcher.Launch(shape, RopeKvWriteKernel<T, RopeStyle::kNeox>, q, k, v, k_pool, v_pool,
                           positions, slot_mapping, cos_sin, max_positions, num_heads,
                           num_kv_heads, head_dim, rope_dim, vectorized);
  }
  return launcher.Launch(shape, RopeKvWriteKernel<T, RopeStyle::kNormal>, q, k, v, k_pool, v_pool,
                         positions, slot_mapping, cos_sin, max_positions, num_heads,
                         num_kv_heads, head_dim, rope_dim, vectorized);
}

}  // namespace tessera::cuda
