// Which query heads a paged-attention block serves (decode and prefill kernels): the grid's x is
// KV heads x head chunks, and a block takes up to `per_block` query heads of its KV head's group
// (GQA: query head h reads KV head h / (num_heads / num_kv_heads)), so every K/V row it loads
// serves all of them.
#pragma once

#include "kernels/cuda/device_compat.cuh"

namespace tessera::cuda {

struct AttentionBlockHeads {
  int kv_head;     // the block's KV head
  int first_head;  // its first query head
  int per_block;   // query heads a block of this launch takes: min(group, the cap)
  int heads;       // query heads this block has (<= per_block: the group's last chunk)
};

// For block blockIdx.x; `cap` is the most query heads a block takes.
__device__ __forceinline__ AttentionBlockHeads BlockHeads(int num_heads, int num_kv_heads,
                                                          int cap) {
  const int group = num_heads / num_kv_heads;
  const int per_block = group < cap ? group : cap;
  const int chunks = (group + cap - 1) / cap;
  const int kv_head = int(blockIdx.x) / chunks;
  const int first_head = kv_head * group + int(blockIdx.x) % chunks * cap;
  const int left = kv_head * group + group - first_head;
  return {kv_head, first_head, per_block, left < per_block ? left : per_block};
}

}  // namespace tessera::cuda
