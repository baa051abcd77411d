// KV write: a token's new K and V rows go to its slot of the paged pools, the device half that
// rope_kv_write.cuh launches (after RoPE, in the same block).
//   k_pool[slot / block_size][slot % block_size][h][d] = k[h][d]   (and the same for v)
// k, v: the token's [num_kv_heads, head_dim] rows of T; k_pool, v_pool: [num_blocks, block_size,
// num_kv_heads, head_dim] of T (bf16, f16 or f32; separate K and V pools); slot =
// block_id * block_size + offset, or -1 for a padding row, which writes nothing. A row is copied
// bit for bit (no conversion), in 16-byte vectors when its size allows (KvRowVectorized),
// consecutive threads on consecutive addresses (fully coalesced).
// Preconditions: distinct non-negative slots < num_blocks * block_size; the pools do not overlap
// k or v; pointers 16-byte aligned when the copy is vectorized.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_compat.cuh"

namespace tessera::cuda {

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

// Whether a row of `row_elements` T moves in 16-byte vectors (pointers permitting).
template <typename T>
inline bool KvRowVectorized(int row_elements) {
  return (row_elements * sizeof(T)) % 16 == 0;
}

}  // namespace tessera::cuda
