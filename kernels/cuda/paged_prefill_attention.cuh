// Paged prefill attention: causal, chunked (a chunk of query tokens that starts after positions
// already in the cache), several sequences of different chunk lengths in one launch, decode
// rows (chunk length 1) mixed in. K/V are read through the block table inside the kernel.
//
// q, out: [num_tokens, num_heads, head_dim] of T, sequence s owning rows
// [query_start_loc[s], query_start_loc[s + 1]) (vLLM's varlen layout, query_start_loc [num_seqs
// + 1] int32, query_start_loc[0] = 0); context_lens: [num_seqs] int32, the sequence's cached
// length INCLUDING this chunk (its K/V already written, rope_kv_write.cuh), so the chunk starts
// at position start = context_lens[s] - chunk_len and its row i attends to positions
// [0, start + i]. k_pool, v_pool: [num_blocks, block_size, num_kv_heads, head_dim] of T;
// block_tables: [num_seqs, max_blocks_per_seq] int32. GQA: query head h reads KV head
// h / (num_heads / num_kv_heads) (kernels/cpu/paged_attention.h). f32 accumulation, one rounding
// to T. A sequence with chunk length 0 (a padding row of a captured batch, context_lens 0 or
// not) writes nothing and reads nothing: no block of it passes the first-token check.
// T: bf16, f16 or f32 (the runner's --dtype f32).
//
// bf16 and f16 at head dims up to 128 run on tensor cores (paged_prefill_attention_tc.cuh, chosen
// by LaunchPagedPrefillAttention); the kernel below serves f32 (the runner's --dtype f32) and
// head_dim 256 (whose 16 x 256 f32 output tile per warp would not fit the registers).
//
// Design (CUDA cores, no tensor cores). A block (4 warps) takes one sequence, one KV head and
// kPrefillRows = 32 query rows (16 at 80/96 and for f32 at 128, 8 at head_dim 256:
// kPrefillRowsFor, shared memory): the (token, head) pairs of tokens_per_block = rows / group
// consecutive chunk tokens and all `group` query heads of the KV head (larger groups take
// several head chunks), so a K/V tile staged in shared memory serves every head of the group.
// Each warp owns rows / 4 rows and keeps their online-softmax state (max, sum,
// ceil(head_dim / 32) output dims per lane) in registers. Per KV tile of 32 keys (16 for f32 at
// head_dim 256, kPrefillKvTileFor; loaded through the block table with 4-byte coalesced loads,
// zeros past the end): lane j scores key j against the row's q (broadcast from shared memory,
// pre-scaled), causal mask, warp max/sum update, then the tile's probabilities go through a
// per-warp shared buffer and each lane accumulates its dims of P·V. Tiles past the block's last
// query position are skipped; rows whose position is below a tile skip it.
// Grid: KV heads x head chunks, sequences, ceil(max_query_len / tokens_per_block) (blocks past
// a sequence's chunk exit at once; decode rows use group of the block's rows).
// Head dims: 64, 128, 256 (Qwen3-Next / Qwen3.5 full attention), 80, 96, and 32 (the tiny test
// models; 64 rows per block, one dim per lane).
//
// Bound (H100): compute on CUDA cores, and below FP32 peak (67 TFLOP/s): the score and P·V
// inner loops issue about one shared-memory load per 1-2 FMAs, so shared-memory bandwidth (32
// words/clock/SM) limits it to roughly a quarter of FP32 peak, ~15 TFLOP/s, against FLOPs =
// 4 x head_dim x num_heads x Σ (causal query-key pairs).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/attention_block_heads.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/paged_prefill_attention_tc.cuh"
#include "kernels/cuda/paged_prefill_params.h"

namespace tessera::cuda {

inline constexpr int kPrefillThreads = 128;
inline constexpr int kPrefillRows = 32;  // (token, head) rows per block
inline constexpr int kPrefillKvTile = 32;  // keys per shared-memory tile (one per lane)

// Rows per block for T and kHeadDim, so that q rows + K/V tiles stay under the 48 KiB static
// shared-memory limit: 32; 16 for f32 with head_dim > 64 (16 + 16.3 + 16 KiB at 128); 8 for
// head_dim > 128 (256: 8 + 16.1 + 16 KiB in bf16/f16). Also 16 at head_dim 80 / 96 (3 dims per
// lane): with 8 rows per warp, f16 at 96 spilled registers. 64 at head_dim 32 (one dim per lane,
// 16 rows per warp; ptxas spilled f16 and bf16 at 16 rows and f16 at 32 for sm_90a).
template <typename T, int kHeadDim>
inline constexpr int kPrefillRowsFor =
    kHeadDim == 32 ? 64
    : kHeadDim > 128
        ? 8
        : (kHeadDim > 64 && (sizeof(T) == 4 || kHeadDim % 64 != 0) ? 16 : kPrefillRows);

// Keys per K/V tile: one per lane (32), except f32 at head_dim > 128, whose 32-key tiles alone
// (33 + 32 KiB) would not fit: 16 keys there (lanes 16..31 score nothing).
template <typename T, int kHeadDim>
inline constexpr int kPrefillKvTileFor = sizeof(T) == 4 && kHeadDim > 128 ? 16 : kPrefillKvTile;

// Output dims per lane: lane + 32 c for c < ceil(head_dim / 32) (at 80 the last c uses lanes
// 0..15 only).
template <int kHeadDim>
inline constexpr int kPrefillDimsPerLane = (kHeadDim + 31) / 32;


inline int PrefillHeadsPerBlock(const PagedPrefillParams& p, int rows_per_block) {
  const int group = p.num_heads / p.num_kv_heads;
  return group < rows_per_block ? group : rows_per_block;
}

template <typename T>
struct alignas(2 * sizeof(T)) PrefillPair {
  T v[2];
};

namespace prefill_detail {

// Stages keys [k0, k0 + kTile) of the sequence's KV head into shared memory (zeros at
// and past kv_end): k_tile [keys][kHeadDim + 2] (padded: conflict-free per-lane rows),
// v_tile [keys][kHeadDim].
template <int kHeadDim, int kTile, typename T>
__device__ __forceinline__ void LoadKvTile(const T* k_pool, const T* v_pool, const int32_t* table,
                                           int k0, int kv_end, int block_size, int num_kv_heads,
                                           int kv_head, T* k_tile, T* v_tile) {
  constexpr int kPairs = kHeadDim / 2;
  for (int i = threadIdx.x; i < kTile * kPairs; i += blockDim.x) {
    const int key = i / kPairs, d = (i % kPairs) * 2;
    const int pos = k0 + key;
    PrefillPair<T> k_pair, v_pair;
    if (pos < kv_end) {
      const int64_t slot = int64_t{__ldg(&table[pos / block_size])} * block_size + pos % block_size;
      const size_t at = (slot * num_kv_heads + kv_head) * kHeadDim + d;
      k_pair = *reinterpret_cast<const PrefillPair<T>*>(k_pool + at);
      v_pair = *reinterpret_cast<const PrefillPair<T>*>(v_pool + at);
    } else {
      k_pair.v[0] = k_pair.v[1] = v_pair.v[0] = v_pair.v[1] = FromFloat<T>(0.0f);
    }
    *reinterpret_cast<PrefillPair<T>*>(k_tile + key * (kHeadDim + 2) + d) = k_pair;
    *reinterpret_cast<PrefillPair<T>*>(v_tile + key * kHeadDim + d) = v_pair;
  }
}

// q_row · k_tile[lane] (q pre-scaled, f32).
template <int kHeadDim, typename T>
__device__ __forceinline__ float Score(const float* q_row, const T* k_tile) {
  const T* k_row = k_tile + (threadIdx.x % 32) * (kHeadDim + 2);
  float dot = 0.0f;
  for (int d = 0; d < kHeadDim; d += 2) {
    const PrefillPair<T> k = *reinterpret_cast<const PrefillPair<T>*>(k_row + d);
    const float2 q = *reinterpret_cast<const float2*>(q_row + d);
    dot += q.x * ToFloat(k.v[0]) + q.y * ToFloat(k.v[1]);
  }
  return dot;
}

// One row's online-softmax state: running max, running sum, this lane's output dims
// lane + 32 c.
template <int kHeadDim>
struct RowState {
  float max = -INFINITY;
  float sum = 0.0f;
  float acc[kPrefillDimsPerLane<kHeadDim>] = {};
};

// Folds the tile's keys (positions k0 + lane for lane < kTile, valid up to `position`) into
// `state`.
template <int kHeadDim, int kTile, typename T>
__device__ __forceinline__ void AttendTile(const float* q_row, const T* k_tile, const T* v_tile,
                                           int k0, int position, float* warp_probs,
                                           RowState<kHeadDim>& state) {
  const int lane = threadIdx.x % 32;
  const bool visible = lane < kTile && k0 + lane <= position;
  const float score = visible ? Score<kHeadDim>(q_row, k_tile) : -INFINITY;
  const float new_max = fmaxf(state.max, WarpMax(score));  // finite: key k0 <= position
  const float alpha = __expf(state.max - new_max);
  const float p = visible ? __expf(score - new_max) : 0.0f;
  state.sum = state.sum * alpha + WarpSum(p);
  state.max = new_max;
  warp_probs[lane] = p;
  __syncwarp();
  TESSERA_UNROLL
  for (int c = 0; c < kPrefillDimsPerLane<kHeadDim>; ++c) {
    if (kHeadDim % 32 != 0 && lane + 32 * c >= kHeadDim) continue;  // 80: the last 16 dims
    float acc = state.acc[c] * alpha;
    for (int j = 0; j < kTile; ++j) {
      acc += warp_probs[j] * ToFloat(v_tile[j * kHeadDim + lane + 32 * c]);
    }
    state.acc[c] = acc;
  }
  __syncwarp();  // warp_probs is rewritten by the next row
}

}  // namespace prefill_detail

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kPrefillThreads)
    PagedPrefillAttentionKernel(const T* __restrict__ q, const T* __restrict__ k_pool,
                                const T* __restrict__ v_pool,
                                const int32_t* __restrict__ block_tables,
                                const int32_t* __restrict__ query_start_loc,
                                const int32_t* __restrict__ context_lens, T* __restrict__ out,
                                PagedPrefillParams params) {
  static_assert(kHeadDim % 16 == 0);
  constexpr int kRows = kPrefillRowsFor<T, kHeadDim>;
  constexpr int kTile = kPrefillKvTileFor<T, kHeadDim>;
  constexpr int kRowsPerWarp = kRows / (kPrefillThreads / 32);
  TESSERA_SHARED(float, q_shared, kRows * kHeadDim);
  TESSERA_SHARED(T, k_tile, kTile * (kHeadDim + 2));
  TESSERA_SHARED(T, v_tile, kTile * kHeadDim);
  TESSERA_SHARED(float, probs, kPrefillThreads);

  const AttentionBlockHeads block = BlockHeads(params.num_heads, params.num_kv_heads, kRows);
  const int heads_per_block = block.per_block, heads = block.heads;
  const int kv_head = block.kv_head, first_head = block.first_head;
  const int tokens_per_block = kRows / heads_per_block;
  const int seq = blockIdx.y;
  const int query_begin = __ldg(&query_start_loc[seq]);
  const int query_len = __ldg(&query_start_loc[seq + 1]) - query_begin;
  const int first_token = blockIdx.z * tokens_per_block;
  if (first_token >= query_len) return;
  const int tokens_left = query_len - first_token;
  const int tokens = tokens_left < tokens_per_block ? tokens_left : tokens_per_block;
  const int kv_end = __ldg(&context_lens[seq]);  // = start + query_len
  const int start = kv_end - query_len;
  const int block_kv_end = start + first_token + tokens;  // last row's position + 1

  // q rows of this block: row r = (token r / heads_per_block, head r % heads_per_block).
  for (int i = threadIdx.x; i < kRows * kHeadDim; i += blockDim.x) {
    const int r = i / kHeadDim, t = r / heads_per_block, g = r % heads_per_block;
    float value = 0.0f;
    if (t < tokens && g < heads) {
      const size_t token = size_t(query_begin) + first_token + t;
      value = ToFloat(q[(token * params.num_heads + first_head + g) * kHeadDim + i % kHeadDim]) *
              params.scale;
    }
    q_shared[i] = value;
  }
  const int warp = threadIdx.x / 32;
  float* warp_probs = probs + warp * 32;
  const int32_t* table = block_tables + size_t(seq) * params.max_blocks_per_seq;
  prefill_detail::RowState<kHeadDim> rows[kRowsPerWarp];
  for (int k0 = 0; k0 < block_kv_end; k0 += kTile) {
    __syncthreads();  // q staged / the previous tile no longer read
    prefill_detail::LoadKvTile<kHeadDim, kTile>(k_pool, v_pool, table, k0, block_kv_end,
                                         params.block_size, params.num_kv_heads, kv_head, k_tile,
                                         v_tile);
    __syncthreads();
    TESSERA_UNROLL
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i;
      const int t = r / heads_per_block, g = r % heads_per_block;
      const int position = start + first_token + t;
      if (t >= tokens || g >= heads || k0 > position) continue;  // warp-uniform
      prefill_detail::AttendTile<kHeadDim, kTile>(q_shared + r * kHeadDim, k_tile, v_tile, k0,
                                                  position, warp_probs, rows[i]);
    }
  }
  const int lane = threadIdx.x % 32;
  TESSERA_UNROLL
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp * kRowsPerWarp + i;
    const int t = r / heads_per_block, g = r % heads_per_block;
    if (t >= tokens || g >= heads) continue;
    const size_t token = size_t(query_begin) + first_token + t;
    T* out_row = out + (token * params.num_heads + first_head + g) * kHeadDim;
    const float inv_sum = 1.0f / rows[i].sum;
    TESSERA_UNROLL
    for (int c = 0; c < kPrefillDimsPerLane<kHeadDim>; ++c) {
      if (kHeadDim % 32 != 0 && lane + 32 * c >= kHeadDim) continue;  // 80: the last 16 dims
      out_row[lane + 32 * c] = FromFloat<T>(rows[i].acc[c] * inv_sum);
    }
  }
}

// Preconditions: shapes above; num_heads % num_kv_heads == 0; for every s, 0 <= chunk length
// <= min(context_lens[s], params.max_query_len), context_lens[s] <= max_blocks_per_seq x
// block_size with table entries for those positions in [0, num_blocks); pools aligned to
// 2 x sizeof(T) bytes;
// out overlaps nothing.
// bf16 / f16 at head_dim <= 128 run on tensor cores (paged_prefill_attention_tc.cuh).
template <class Launcher, typename T, int kHeadDim>
auto LaunchPagedPrefillAttention(Launcher& launcher, const PagedPrefillParams& params, const T* q,
                                 const T* k_pool, const T* v_pool, const int32_t* block_tables,
                                 const int32_t* query_start_loc, const int32_t* context_lens,
                                 T* out) {
  if constexpr (PrefillUsesTensorCores<T, kHeadDim>) {
    return LaunchPagedPrefillAttentionTc<Launcher, T, kHeadDim>(
        launcher, params, q, k_pool, v_pool, block_tables, query_start_loc, context_lens, out);
  } else {
    constexpr int kRows = kPrefillRowsFor<T, kHeadDim>;
    const int heads_per_block = PrefillHeadsPerBlock(params, kRows);
    const int chunks = int(CeilDiv(params.num_heads / params.num_kv_heads, kRows));
    const int tokens_per_block = kRows / heads_per_block;
    const int query_len = params.max_query_len > 1 ? params.max_query_len : 1;
    const LaunchShape shape{dim3(params.num_kv_heads * chunks, params.num_seqs,
                                 CeilDiv(query_len, tokens_per_block)),
                            dim3(kPrefillThreads), 0};
    return launcher.Launch(shape, PagedPrefillAttentionKernel<T, kHeadDim>, q, k_pool, v_pool,
                           block_tables, query_start_loc, context_lens, out, params);
  }
}

}  // namespace tessera::cuda
