// The attention step's input half in one launch: optional q/k/v biases, RoPE on q and k, then the
// KV write (what elementwise.cuh's bias add, rope.cuh's rotation and a slot copy would do one
// after another). Exact: each bias added in f32 and rounded to T (as LaunchAddBias), then the
// CPU engine's rotation (kernels::cpu::ApplyRope on the same table) of those values, rounded once
// to T (rope.cuh's RotateValues), then the rows stored bit for bit in their slots.
//
// Two layouts of the inputs (RopeKvWriteRows):
//   - separate: q [tokens, heads, head_dim], k and v [tokens, kv_heads, head_dim], each dense; q and
//     k are rotated in place;
//   - one fused projection's output (a QKV GEMM): rows of [q | k | v] with a row stride; q is
//     copied out to `q_out` (dense) and rotated there, k is rotated in place (in the fused row),
//     k and v go to the pools from the fused row.
// Design: one block per (token, head) over the token's q heads, then its k heads, then its v
// heads (num_heads + 2 x num_kv_heads blocks per token), a thread per rotation pair (head_dim / 2
// threads, whole warps): it reads its pair (from the fused row or q_in, plus the bias), rotates
// it in registers and writes it where it goes (q_out; k in place and to its pool slot; v, biased
// in place, to its slot). The non-rotated tail of a partial rotary head (rope_dim < head_dim) is
// copied the same way. No barrier: every element belongs to one thread, which reads it before
// it writes it. Bound (H100): memory, each q, k and v element read and written once (k and v
// twice, row and pool), the table row once per head from L1/L2; at decode sizes latency-bound,
// one round trip to memory (a block per token ran its heads' three phases in sequence, with
// barriers between them: ~9 µs above an empty kernel at batch 1 on the 8B shape, ncu on an
// H200).
#pragma once

#include <cstdint>

#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/ptx_ops.cuh"
#include "kernels/cuda/rope.cuh"

namespace tessera::cuda {

// The most threads of a block (one per rotation pair of a head).
inline constexpr int kRopeMaxThreads = 256;

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

// T(from[i] + bias[i]) (bias null: from[i]), the value LaunchAddBias would store.
template <typename T>
__device__ __forceinline__ T Biased(const T* from, const T* bias, int i) {
  return bias ? FromFloat<T>(ToFloat(from[i]) + ToFloat(bias[i])) : from[i];
}

// One head of one token: `from` (+ `bias`) rotated (rotate: the position is in the table) into
// `row` and, when `pool` is not null, into `pool` too.
template <typename T, RopeStyle kStyle>
__device__ __forceinline__ void HeadToRows(const T* from, const T* bias, T* row, T* pool,
                                          const float* cos_sin, bool rotate, int head_dim,
                                          int rope_dim) {
  const int half_rope = rope_dim / 2;
  for (int i = threadIdx.x; i < half_rope; i += blockDim.x) {
    const int2 e = RopePairElements<kStyle>(i, half_rope);
    T x0 = Biased(from, bias, e.x), x1 = Biased(from, bias, e.y);
    if (rotate) RotateValues(x0, x1, cos_sin, i);
    row[e.x] = x0, row[e.y] = x1;
    if (pool) pool[e.x] = x0, pool[e.y] = x1;
  }
  for (int i = rope_dim + threadIdx.x; i < head_dim; i += blockDim.x) {
    const T x = Biased(from, bias, i);
    row[i] = x;
    if (pool) pool[i] = x;
  }
}

}  // namespace rope_kv_detail

template <typename T, RopeStyle kStyle>
__global__ void __launch_bounds__(kRopeMaxThreads)
    RopeKvWriteKernel(RopeKvWriteRows<T> rows, T* __restrict__ k_pool, T* __restrict__ v_pool,
                      const int32_t* __restrict__ positions,
                      const int32_t* __restrict__ slot_mapping, const float* __restrict__ cos_sin,
                      int max_positions, int num_heads, int num_kv_heads, int head_dim,
                      int rope_dim) {
  ptx::GridDependencyWait();  // a dependent launch (LaunchShape::dependent)
  ptx::LaunchDependents();
  const int64_t token = blockIdx.x;
  const int head = blockIdx.y;
  const int32_t pos = positions[token];
  const bool rotate = pos >= 0 && pos < max_positions;
  const float* table = cos_sin + (rotate ? int64_t{pos} * rope_dim : 0);
  if (head < num_heads) {
    const int64_t offset = int64_t{head} * head_dim;
    rope_kv_detail::HeadToRows<T, kStyle>(
        rows.q_in + token * rows.q_stride + offset, rows.q_bias ? rows.q_bias + offset : nullptr,
        rows.q_out + token * num_heads * head_dim + offset, nullptr, table, rotate, head_dim,
        rope_dim);
    return;
  }
  const bool is_k = head < num_heads + num_kv_heads;
  const int kv_head = head - num_heads - (is_k ? 0 : num_kv_heads);
  const int64_t offset = int64_t{kv_head} * head_dim;
  const int64_t slot = __ldg(&slot_mapping[token]);
  T* const pool = slot < 0 ? nullptr  // padding row
                           : (is_k ? k_pool : v_pool) + slot * num_kv_heads * head_dim + offset;
  T* const row = (is_k ? rows.k : rows.v) + token * rows.kv_stride + offset;
  const T* const bias = is_k ? rows.k_bias : rows.v_bias;
  rope_kv_detail::HeadToRows<T, kStyle>(row, bias ? bias + offset : nullptr, row, pool, table,
                                        rotate && is_k, head_dim, is_k ? rope_dim : 0);
}

// Preconditions: num_tokens > 0 (< 2^31); num_heads >= 0, num_kv_heads >= 1,
// num_heads + 2 x num_kv_heads <= 65535; head_dim <= 2 x kRopeMaxThreads; rope_dim even,
// 2 <= rope_dim <= head_dim; cos_sin holds max_positions * rope_dim floats laid out as
// RopeTable's; q and k do not overlap; q_out does not overlap q_in's rows unless equal; strides
// >= the rows they step over. Slots and pools: k_pool, v_pool are [num_blocks, block_size,
// num_kv_heads, head_dim] of T (separate, not overlapping the rows); slot_mapping[t] =
// block_id * block_size + offset, distinct and < num_blocks * block_size, or -1 for a padding
// row, which writes nothing; rows are stored bit for bit.
template <class Launcher, typename T>
auto LaunchRopeKvWrite(Launcher& launcher, RopeStyle style, const RopeKvWriteRows<T>& rows,
                       T* k_pool, T* v_pool, const int32_t* positions,
                       const int32_t* slot_mapping, const float* cos_sin, int max_positions,
                       int num_tokens, int num_heads, int num_kv_heads, int head_dim,
                       int rope_dim) {
  const unsigned pairs = static_cast<unsigned>(head_dim / 2 > 0 ? head_dim / 2 : 1);
  const LaunchShape shape{dim3(num_tokens, num_heads + 2 * num_kv_heads),
                          dim3(CeilDiv(pairs, 32) * 32), 0, /*dependent=*/true};
  auto* kernel = style == RopeStyle::kNeox ? RopeKvWriteKernel<T, RopeStyle::kNeox>
                                           : RopeKvWriteKernel<T, RopeStyle::kNormal>;
  return launcher.Launch(shape, kernel, rows, k_pool, v_pool, positions, slot_mapping, cos_sin,
                         max_positions, num_heads, num_kv_heads, head_dim, rope_dim);
}

}  // namespace tessera::cuda
