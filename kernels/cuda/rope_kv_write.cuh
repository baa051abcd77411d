// The attention step's input half in one launch: optional q/k/v biases, RoPE on q and k, then the
// KV write (elementwise.cuh's bias add, rope.cuh's RotateToken, kv_write.cuh's WriteTokenKv, per
// token). Exact: each bias added in f32 and rounded to T (as LaunchAddBias), then the CPU
// engine's rotation (kernels::cpu::ApplyRope on the same table) of those values, rounded once to
// T, then the rows copied bit for bit to their slots.
//
// Two layouts of the inputs (RopeKvWriteRows):
//   - separate: q [tokens, heads, head_dim], k and v [tokens, kv_heads, head_dim], each dense; q and
//     k are rotated in place;
//   - one fused projection's output (a QKV GEMM): rows of [q | k | v] with a row stride; q is
//     copied out to `q_out` (dense) and rotated there, k is rotated in place (in the fused row),
//     k and v go to the pools from the fused row.
// Design: one block per token; its threads copy q out (fused layout) and add the biases, a
// barrier; rotate the token's q and k pairs, a barrier (the rotated k, written by any thread, is
// read next); copy k and v to the token's slot (none for slot -1). Bound (H100): memory, the
// rotated part of q and k read and written once (rope.cuh) and the k and v rows written to the
// pools, k read back from L1/L2; at decode sizes launch-bound (RoPE and the KV write were two
// launches before the fusion).
#pragma once

#include <cstdint>

#include "kernels/cuda/kv_write.cuh"
#include "kernels/cuda/ptx_ops.cuh"
#include "kernels/cuda/rope.cuh"

namespace tessera::cuda {

// Where a token's rows are: q_in/k/v advance by `stride` (k and v may alias q_in's rows), q_out
// by heads x head_dim; q_out == q_in means in place. Biases (null: none) are added first, each
// element T(x + bias) as LaunchAddBias computes it; k and v take theirs in place.
template <typename T>
struct RopeKvWriteRows {
  const T* q_in;
  T* q_out;
  T* k;
  T* v;
  int64_t q_stride, kv_stride;
  const T* q_bias = nullptr;
  const T* k_bias = nullptr;
  const T* v_bias = nullptr;
};

namespace rope_kv_detail {

// row[i] = T(from[i] + bias[i]) (bias null: a copy; from == row and no bias: nothing to do).
template <typename T>
__device__ __forceinline__ void BiasRow(const T* from, const T* bias, T* row, int elements) {
  if (from == row && bias == nullptr) return;
  for (int i = threadIdx.x; i < elements; i += blockDim.x) {
    row[i] = bias ? FromFloat<T>(ToFloat(from[i]) + ToFloat(bias[i])) : from[i];
  }
}

}  // namespace rope_kv_detail

template <typename T, RopeStyle kStyle>
__global__ void __launch_bounds__(kRopeMaxThreads)
    RopeKvWriteKernel(RopeKvWriteRows<T> rows, T* __restrict__ k_pool, T* __restrict__ v_pool,
                      const int32_t* __restrict__ positions,
                      const int32_t* __restrict__ slot_mapping, const float* __restrict__ cos_sin,
                      int max_positions, int num_heads, int num_kv_heads, int head_dim,
                      int rope_dim, bool vectorized) {
  ptx::GridDependencyWait();  // a dependent launch (LaunchShape::dependent)
  ptx::LaunchDependents();
  const int64_t token = blockIdx.x;
  const int q_elements = num_heads * head_dim, kv_elements = num_kv_heads * head_dim;
  T* q_token = rows.q_out + token * q_elements;
  T* k_token = rows.k + token * rows.kv_stride;
  T* v_token = rows.v + token * rows.kv_stride;
  const T* q_from = rows.q_in + token * rows.q_stride;
  if (q_from != q_token || rows.q_bias || rows.k_bias || rows.v_bias) {
    rope_kv_detail::BiasRow(q_from, rows.q_bias, q_token, q_elements);
    rope_kv_detail::BiasRow(k_token, rows.k_bias, k_token, kv_elements);
    rope_kv_detail::BiasRow(v_token, rows.v_bias, v_token, kv_elements);
    __syncthreads();  // q, k and v, written by any thread, are read below
  }
  RotateToken<T, kStyle>(q_token, k_token, positions[token], cos_sin, max_positions, num_heads,
                         num_kv_heads, head_dim, rope_dim);
  __syncthreads();  // the rotated k, written by any thread of the block, is read below
  WriteTokenKv(k_token, v_token, k_pool, v_pool, __ldg(&slot_mapping[token]), kv_elements,
               vectorized);
}

// Preconditions: num_tokens > 0 (< 2^31); num_heads >= 0, num_kv_heads >= 1; rope_dim even,
// 2 <= rope_dim <= head_dim; cos_sin holds max_positions * rope_dim floats laid out as
// RopeTable's; q and k do not overlap; kv_write.cuh's for the slots and pools; q_out does not
// overlap q_in's rows unless equal; strides >= the rows they step over; the 16-byte copy needs
// 16-byte aligned rows, which this checks on the row sizes and strides (pointers come from
// 16-byte aligned buffers).
template <class Launcher, typename T>
auto LaunchRopeKvWrite(Launcher& launcher, RopeStyle style, const RopeKvWriteRows<T>& rows,
                       T* k_pool, T* v_pool, const int32_t* positions,
                       const int32_t* slot_mapping, const float* cos_sin, int max_positions,
                       int num_tokens, int num_heads, int num_kv_heads, int head_dim,
                       int rope_dim) {
  const bool vectorized = KvRowVectorized<T>(num_kv_heads * head_dim) &&
                          (rows.kv_stride * int64_t(sizeof(T))) % 16 == 0 &&
                          ((rows.v - rows.k) * int64_t(sizeof(T))) % 16 == 0;
  const LaunchShape shape{dim3(num_tokens), dim3(RopeThreads(num_heads, num_kv_heads, rope_dim)),
                          0, /*dependent=*/true};
  if (style == RopeStyle::kNeox) {
    return launcher.Launch(shape, RopeKvWriteKernel<T, RopeStyle::kNeox>, rows, k_pool, v_pool,
                           positions, slot_mapping, cos_sin, max_positions, num_heads,
                           num_kv_heads, head_dim, rope_dim, vectorized);
  }
  return launcher.Launch(shape, RopeKvWriteKernel<T, RopeStyle::kNormal>, rows, k_pool, v_pool,
                         positions, slot_mapping, cos_sin, max_positions, num_heads, num_kv_heads,
                         head_dim, rope_dim, vectorized);
}

}  // namespace tessera::cuda
