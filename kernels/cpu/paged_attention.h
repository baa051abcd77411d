// Causal multi-head attention over a paged KV cache (CPU), for a batch of sequences.
//
// Sequence s has num_query_tokens query rows at positions [start_pos, start_pos + n); the row at
// position p attends to positions 0..p of that sequence, read through its block table from the
// pools (see kv_cache.h; the K/V of the query tokens themselves must already be written, i.e.
// call WriteKv first). GQA: query head h uses KV head h / (num_heads / num_kv_heads).
//
// Batch/chunk invariance (DESIGN.md §6): each (query row, head) is computed by one thread with an
// order fixed by its position p only — scores s_j = (q · k_j) * scale for j = 0..p (each dot with
// the 16-lane order of matmul.h), m = max s_j, e_j = exp(s_j - m) summed with the 16-lane order of
// softmax.h (lane = j % 16), out = (Σ_j e_j v_j, accumulated in j order) * (1 / Σ e_j). So a
// sequence's output does not depend on the other sequences in the batch, the thread count, or how
// its prompt was chunked. Parallelized over (query row, head) pairs; the query heads that share a
// KV head are processed together (up to 4 for head_dim 64, 2 for 128), so each K/V row is read
// once per group; per head the arithmetic is unchanged. Items are head-major, which balances
// causal prefill (early rows are cheap) across the pool's ranges.
// Threading: called from the thread that drives `pool`; reads q and the pools, writes out only.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/float16.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/thread_pool.h"

namespace tessera::kernels::cpu {

inline constexpr int kMaxAttentionHeadDim = 256;

struct AttentionSequence {
  int64_t query_begin = 0;   // first row of this sequence in q / out
  int32_t num_query_tokens = 0;
  int32_t start_pos = 0;     // position of the first query row
  std::span<const int32_t> block_table;  // logical block -> physical block id
};

struct PagedAttentionParams {
  int num_heads = 0;  // query heads; a multiple of kv.num_kv_heads
  float scale = 0;    // usually 1 / sqrt(head_dim)
  PagedKvShape kv;
};

// q, out: [total_rows, num_heads, head_dim], rows of sequence s at
// [query_begin, query_begin + num_query_tokens), sequences back to back in order from row 0.
// k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim].
// Preconditions: shapes as stated; head_dim <= kMaxAttentionHeadDim; each block table covers
// positions 0 .. start_pos + num_query_tokens - 1 with ids in [0, num_blocks); out does not
// overlap q or the caches; IsaSupported(isa).
void PagedAttention(ThreadPool& pool, const PagedAttentionParams& params, std::span<const float> q,
                    std::span<const float> k_cache, std::span<const float> v_cache,
                    std::span<const AttentionSequence> sequences, std::span<float> out,
                    Isa isa = BestIsa());

// The same over f16 pools (kv_cache.h): each K/V value is converted to f32 (exactly) as it is
// loaded, then the arithmetic is the f32 overload's, so the result is bit-identical to the f32
// overload on pools holding the same (f16-representable) values.
void PagedAttention(ThreadPool& pool, const PagedAttentionParams& params, std::span<const float> q,
                    std::span<const Float16> k_cache, std::span<const Float16> v_cache,
                    std::span<const AttentionSequence> sequences, std::span<float> out,
                    Isa isa = BestIsa());

}  // namespace tessera::kernels::cpu
