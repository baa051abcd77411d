// KV write: the new K and V rows of a step go to their slots of the paged pools.
//   k_pool[slot / block_size][slot % block_size][h][d] = k[token][h][d]   (and the same for v)
// k, v: [num_tokens, num_kv_heads, head_dim] of T; k_pool, v_pool: [num_blocks, block_size,
// num_kv_heads, head_dim] of T (bf16, f16 or f32; separate K and V pools);
// slot_mapping: [num_tokens] int32, slot = block_id * block_size + offset, or -1 for a padding
// row, which writes nothing. A row is copied bit for bit (no conversion).
// Preconditions: distinct non-negative slots < num_blocks * block_size; the pools do not overlap
// k or v; pointers 16-byte aligned when num_kv_heads * head_dim * sizeof(T) is a multiple of 16
// (then the copy moves 16-byte vectors, otherwise single elements).
// Grid: one block per token, kKvWriteThreads threads striding over the row.
// Bound (H100): memory; 2 * num_tokens * row bytes read and the same written, ÷ 3.35 TB/s (for a
// 256-token step of an 8 x 128 bf16 row: 2 MiB in, 2 MiB out, ~1.3 µs, i.e. launch-latency
// bound). Loads and stores are 16-byte vectors, consecutive threads on consecutive addresses
// (fully coalesced); one slot lookup per block.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kKvWriteThreads = 128;

// Copies `count` units of Unit from `from` to `to`, strided over the block's threads.
template <typename Unit>
__device__ __forceinline__ void CopyRow(const Unit* __restrict__ from, Unit* __restrict__ to,
                                        int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) to[i] = from[i];
}

// One token's k and v rows (k_row, v_row) to `slot` (none for -1), the block's threads striding
// over the row.
template <typename T>
__device__ __forceinline__ void WriteTokenKv(const T* k_row, const T* v_row, T* k_pool, T* v_pool,
                                             int64_t slot, int row_elements, bool vectorized) {
  if (slot < 0) return;  // padding row
  const int64_t target = slot * row_elements;  // slot = block * block_size + offset
  if (vectorized) {
    const int units = row_elements * int(sizeof(T)) / 16;
    CopyRow(reinterpret_cast<const uint4*>(k_row), reinterpret_cast<uint4*>(k_pool + target),
            units);
    CopyRow(reinterpret_cast<const uint4*>(v_row), reinterpret_cast<uint4*>(v_pool + target),
            units);
  } else {
    CopyRow(k_row, k_pool + target, row_elements);
    CopyRow(v_row, v_pool + target, row_elements);
  }
}

template <typename T>
__global__ void __launch_bounds__(kKvWriteThreads)
    KvWriteKernel(const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ k_pool,
                  T* __restrict__ v_pool, const int32_t* __restrict__ slot_mapping,
                  int row_elements, bool vectorized) {
  const int64_t token = blockIdx.x;
  WriteTokenKv(k + token * row_elements, v + token * row_elements, k_pool, v_pool,
               __ldg(&slot_mapping[token]), row_elements, vectorized);
}

// Whether a row of `row_elements` T moves in 16-byte vectors (pointers permitting).
template <typename T>
inline bool KvRowVectorized(int row_elements) {
  return (row_elements * sizeof(T)) % 16 == 0;
}

template <class Launcher, typename T>
auto LaunchKvWrite(Launcher& launcher, const T* k, const T* v, T* k_pool, T* v_pool,
                   const int32_t* slot_mapping, int num_tokens, int num_kv_heads, int head_dim) {
  const int row_elements = num_kv_heads * head_dim;
  const bool vectorized = KvRowVectorized<T>(row_elements);
  const LaunchShape shape{dim3(num_tokens), dim3(kKvWriteThreads), 0};
  return launcher.Launch(shape, KvWriteKernel<T>, k, v, k_pool, v_pool, slot_mapping,
                         row_elements, vectorized);
}

}  // namespace tessera::cuda
