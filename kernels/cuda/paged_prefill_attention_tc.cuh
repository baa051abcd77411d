// Paged prefill attention on tensor cores (FlashAttention-2 style) for bf16 and f16 at head dims
// 32, 64, 80, 96 and 128: the same contract as paged_prefill_attention.cuh (causal, chunked after
// cached positions, varlen sequences, decode rows mixed in, K/V through the block table), which
// dispatches here (PrefillUsesTensorCores); f32 and head_dim 256 stay on its CUDA-core kernel.
//
// Design. A block (4 warps) takes one sequence, one KV head and kTcRows = 64 (token, query head)
// rows: tokens_per_block = 64 / heads_per_block consecutive chunk tokens times the group's query
// heads (as the CUDA-core kernel), so every K/V tile serves every head of the group. Each warp owns
// 16 rows as one m16 MMA tile:
//   - its Q rows, staged once through shared memory, stay in registers as A fragments
//     (ldmatrix x4, head_dim / 16 of them);
//   - K/V tiles of kTcKeys = 32 keys stream through shared memory, 2 stages deep: 16-byte
//     cp.async copies through the block table (ptx_ops.cuh), rows padded by 8 elements so that
//     ldmatrix reads are conflict-free; keys past the block's last position are zero-filled;
//   - S = Q Kᵀ: mma.sync m16n8k16 (f32 accumulate), K fragments by ldmatrix x4 (two 8-key
//     n-tiles per load);
//   - online softmax on the accumulator fragments (a row's 32 scores live in the 4 lanes of a
//     quad; max and sum by two xor shuffles), causal mask by position, scale applied in f32;
//   - O += P V: P rounded to T straight from the S fragments into A fragments (the accumulator
//     layout of m16n8 is the A layout of m16k16 for two n-tiles), V fragments by ldmatrix.trans;
//     O (16 x head_dim f32) in registers, rescaled per tile;
//   - out = O / l, rounded to T once.
// Tiles past the block's last query position are not loaded; rows past a tile's keys mask them
// (exp gives 0, the rescale 1). Unused rows of a block (tokens past the chunk, heads past the
// group) compute a copy of a valid row and write nothing.
// Numerics against the f32 CUDA-core kernel: identical except P, rounded to T before P·V (as
// FlashAttention does): |error| <= eps_T x Σ_j p_j |v_j| / l on top of the output's rounding.
//
// Bound (H100): tensor cores, 989 TFLOP/s dense bf16 for FLOPs = 4 x head_dim x num_heads x Σ
// (causal query-key pairs). This kernel's design target is FlashAttention-2's level, >= 35% of
// peak at 4k tokens (mma.sync + ldmatrix + cp.async; wgmma/TMA would need an emulator fallback,
// DESIGN §11); short chunks are bound by the K/V bytes instead. Not measured on a GPU yet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention_block_heads.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/packed_decode.cuh"
#include "kernels/cuda/paged_prefill_params.h"
#include "kernels/cuda/ptx_ops.cuh"

namespace tessera::cuda {

inline constexpr int kTcThreads = 128;
inline constexpr int kTcRows = 64;   // (token, head) rows per block: 16 per warp
inline constexpr int kTcKeys = 32;   // keys per K/V tile
inline constexpr int kTcStages = 2;  // cp.async pipeline depth
// Blocks per SM the kernel is built for: caps registers at 170 per thread (head_dim 128 uses
// 167); without a cap ptxas spilled a few bytes at 64 and 96.
inline constexpr int kTcBlocksPerSm = 3;

// Whether LaunchPagedPrefillAttention takes this kernel for T and kHeadDim.
template <typename T, int kHeadDim>
inline constexpr bool PrefillUsesTensorCores =
    !std::is_same_v<T, float> && kHeadDim % 16 == 0 && kHeadDim <= 128;

namespace prefill_tc_detail {

template <typename T>
inline constexpr ptx::MmaType kMmaTypeOf =
    std::is_same_v<T, __half> ? ptx::MmaType::kF16 : ptx::MmaType::kBf16;

// T per shared-memory row: 8 elements (16 bytes) of padding shift consecutive rows by 4 banks,
// so the 8 row addresses of an ldmatrix land in distinct banks.
template <int kHeadDim>
inline constexpr int kStride = kHeadDim + 8;

// The block's rows and positions.
struct BlockRows {
  int heads_per_block, heads, tokens, first_token, query_begin, start, first_head;
  // Row r of the block as (token, head) offsets, clamped to a valid pair for unused rows.
  __device__ __forceinline__ int Token(int r) const {
    const int t = r / heads_per_block;
    return t < tokens ? t : tokens - 1;
  }
  __device__ __forceinline__ int Head(int r) const {
    const int g = r % heads_per_block;
    return g < heads ? g : heads - 1;
  }
  __device__ __forceinline__ bool Used(int r) const {
    return r / heads_per_block < tokens && r % heads_per_block < heads;
  }
};

// Stages keys [k0, k0 + kTcKeys) of the KV head into k_tile / v_tile (16-byte cp.async copies
// through the block table; zeros at and past kv_end), then commits a group (empty when
// k0 >= kv_end, keeping every thread's group count in step).
template <int kHeadDim, typename T>
__device__ __forceinline__ void IssueKvTile(const T* k_pool, const T* v_pool, const int32_t* table,
                                            int k0, int kv_end, int block_size, int num_kv_heads,
                                            int kv_head, T* k_tile, T* v_tile) {
  constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks
  constexpr int kKeysPerPass = kTcThreads / kChunksPerRow;
  constexpr int kPasses = (kTcKeys + kKeysPerPass - 1) / kKeysPerPass;
  if (k0 < kv_end) {
    const int element = int(threadIdx.x % kChunksPerRow) * 8;
    const int first_key = int(threadIdx.x / kChunksPerRow);
    TESSERA_UNROLL for (int i = 0; i < kPasses; ++i) {
      const int key = first_key + i * kKeysPerPass;
      if (first_key >= kKeysPerPass || key >= kTcKeys) break;
      T* k_at = k_tile + key * kStride<kHeadDim> + element;
      T* v_at = v_tile + key * kStride<kHeadDim> + element;
      const int pos = k0 + key;
      if (pos < kv_end) {
        const int64_t slot =
            int64_t{__ldg(&table[pos / block_size])} * block_size + pos % block_size;
        const size_t at = size_t(slot * num_kv_heads + kv_head) * kHeadDim + element;
        ptx::CpAsync16(k_at, k_pool + at);
        ptx::CpAsync16(v_at, v_pool + at);
      } else {
        *reinterpret_cast<float4*>(k_at) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        *reinterpret_cast<float4*>(v_at) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
  }
  ptx::CpAsyncCommit();
}

// Copies the block's 64 q rows (each clamped to a valid (token, head)) to shared memory.
template <int kHeadDim, typename T>
__device__ __forceinline__ void StageQ(const T* q, const BlockRows& b, int num_heads,
                                       T* q_stage) {
  constexpr int kChunksPerRow = kHeadDim / 8;
  for (int i = threadIdx.x; i < kTcRows * kChunksPerRow; i += blockDim.x) {
    const int r = i / kChunksPerRow, element = (i % kChunksPerRow) * 8;
    const size_t token = size_t(b.query_begin) + b.first_token + b.Token(r);
    const T* source = q + (token * num_heads + b.first_head + b.Head(r)) * kHeadDim + element;
    *reinterpret_cast<float4*>(q_stage + r * kStride<kHeadDim> + element) =
        *reinterpret_cast<const float4*>(source);
  }
}

// S[16 x 32] = Q Kᵀ for this warp's rows and the tile's keys: s[n] is n-tile n (keys 8n..8n+7).
template <int kHeadDim, typename T>
__device__ __forceinline__ void TileScores(const uint32_t (&qf)[kHeadDim / 16][4], const T* k_tile,
                                           float (&s)[kTcKeys / 8][4]) {
  const int lane = threadIdx.x % 32;
  TESSERA_UNROLL for (int n = 0; n < kTcKeys / 8; ++n) {
    TESSERA_UNROLL for (int i = 0; i < 4; ++i) s[n][i] = 0.0f;
  }
  TESSERA_UNROLL for (int c = 0; c < kHeadDim / 16; ++c) {
    TESSERA_UNROLL for (int n = 0; n < kTcKeys / 8; n += 2) {
      // Matrices: (keys of n-tile n, dims 16c..+7), (n, 16c+8..), (n + 1, 16c..), (n + 1, 16c+8..).
      const int key = 8 * (n + lane / 16) + lane % 8;
      uint32_t b[4];
      ptx::LdMatrix<4>(b, k_tile + key * kStride<kHeadDim> + 16 * c + 8 * ((lane / 8) % 2));
      ptx::MmaM16N8K16<kMmaTypeOf<T>>(s[n], qf[c], b, s[n]);
      ptx::MmaM16N8K16<kMmaTypeOf<T>>(s[n + 1], qf[c], b + 2, s[n + 1]);
    }
  }
}

// One warp's softmax state for its two rows per lane (g and g + 8 of its m16 tile).
struct TileSoftmax {
  float max[2] = {-INFINITY, -INFINITY};
  float sum[2] = {0.0f, 0.0f};
};

// Masks and scales s (the tile at k0; row h of this lane at `position[h]`), updates the running
// max and sum, turns s into p = exp(s - max) and returns each row's rescale of the old output.
template <int kTiles>
__device__ __forceinline__ void TileSoftmaxUpdate(float (&s)[kTiles][4], int k0,
                                                  const int (&position)[2], float scale,
                                                  TileSoftmax& state, float (&rescale)[2]) {
  const int t = threadIdx.x % 4;
  TESSERA_UNROLL for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
    TESSERA_UNROLL for (int n = 0; n < kTiles; ++n) {
      TESSERA_UNROLL for (int e = 0; e < 2; ++e) {
        const int key = k0 + 8 * n + 2 * t + e;
        float& v = s[n][2 * h + e];
        v = key <= position[h] ? v * scale : -INFINITY;
        tile_max = fmaxf(tile_max, v);
      }
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xFFFFFFFFu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xFFFFFFFFu, tile_max, 2));
    const float m = fmaxf(state.max[h], tile_max);  // finite: every row sees key 0 in tile 0
    float tile_sum = 0.0f;
    TESSERA_UNROLL for (int n = 0; n < kTiles; ++n) {
      TESSERA_UNROLL for (int e = 0; e < 2; ++e) {
        float& v = s[n][2 * h + e];
        v = __expf(v - m);  // 0 where masked
        tile_sum += v;
      }
    }
    tile_sum += __shfl_xor_sync(0xFFFFFFFFu, tile_sum, 1);
    tile_sum += __shfl_xor_sync(0xFFFFFFFFu, tile_sum, 2);
    rescale[h] = __expf(state.max[h] - m);  // 0 on the first tile (max = -inf)
    state.sum[h] = state.sum[h] * rescale[h] + tile_sum;
    state.max[h] = m;
  }
}

// O[16 x head_dim] = O x rescale + P V, P from the S fragments rounded to T.
template <int kHeadDim, typename T>
__device__ __forceinline__ void TileValues(const float (&p)[kTcKeys / 8][4], const T* v_tile,
                                           const float (&rescale)[2],
                                           float (&o)[kHeadDim / 8][4]) {
  const int lane = threadIdx.x % 32;
  TESSERA_UNROLL for (int d = 0; d < kHeadDim / 8; ++d) {
    o[d][0] *= rescale[0];
    o[d][1] *= rescale[0];
    o[d][2] *= rescale[1];
    o[d][3] *= rescale[1];
  }
  TESSERA_UNROLL for (int c = 0; c < kTcKeys / 16; ++c) {
    // A fragment of keys 16c..16c+15: n-tiles 2c (cols 0..7) and 2c + 1 (cols 8..15).
    const uint32_t a[4] = {packed_detail::PackPair<T>(p[2 * c][0], p[2 * c][1]),
                           packed_detail::PackPair<T>(p[2 * c][2], p[2 * c][3]),
                           packed_detail::PackPair<T>(p[2 * c + 1][0], p[2 * c + 1][1]),
                           packed_detail::PackPair<T>(p[2 * c + 1][2], p[2 * c + 1][3])};
    const int key = 16 * c + lane % 8 + 8 * ((lane / 8) % 2);
    TESSERA_UNROLL for (int d = 0; d < kHeadDim / 8; d += 2) {
      // Matrices: (keys 16c..+7, dims of tile d), (16c+8.., d), (16c.., d + 1), (16c+8.., d + 1).
      uint32_t b[4];
      ptx::LdMatrix<4, true>(b, v_tile + key * kStride<kHeadDim> + 8 * (d + lane / 16));
      ptx::MmaM16N8K16<kMmaTypeOf<T>>(o[d], a, b, o[d]);
      ptx::MmaM16N8K16<kMmaTypeOf<T>>(o[d + 1], a, b + 2, o[d + 1]);
    }
  }
}

}  // namespace prefill_tc_detail

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kTcThreads, kTcBlocksPerSm)
    PagedPrefillAttentionTcKernel(const T* __restrict__ q, const T* __restrict__ k_pool,
                                  const T* __restrict__ v_pool,
                                  const int32_t* __restrict__ block_tables,
                                  const int32_t* __restrict__ query_start_loc,
                                  const int32_t* __restrict__ context_lens, T* __restrict__ out,
                                  PagedPrefillParams params) {
  static_assert(PrefillUsesTensorCores<T, kHeadDim> && (kHeadDim / 8) % 2 == 0);
  constexpr int kStride = prefill_tc_detail::kStride<kHeadDim>;
  constexpr int kTileElements = kTcKeys * kStride;
  static_assert(kTcRows * kStride <= 2 * kTcStages * kTileElements);  // Q fits the K/V stages
  TESSERA_SHARED(float4, stages, 2 * kTcStages * kTileElements * sizeof(T) / sizeof(float4));
  T* const kv = reinterpret_cast<T*>(stages);  // stage s: K at 2s, V at 2s + 1 (x kTileElements)

  const AttentionBlockHeads block = BlockHeads(params.num_heads, params.num_kv_heads, kTcRows);
  const int heads_per_block = block.per_block;
  const int seq = blockIdx.y;
  const int query_begin = __ldg(&query_start_loc[seq]);
  const int query_len = __ldg(&query_start_loc[seq + 1]) - query_begin;
  const int tokens_per_block = kTcRows / heads_per_block;
  const int first_token = blockIdx.z * tokens_per_block;
  if (first_token >= query_len) return;
  const int tokens_left = query_len - first_token;
  const int kv_end = __ldg(&context_lens[seq]);  // = start + query_len
  const prefill_tc_detail::BlockRows rows{
      heads_per_block, block.heads,
      tokens_left < tokens_per_block ? tokens_left : tokens_per_block, first_token, query_begin,
      kv_end - query_len, block.first_head};
  const int block_kv_end = rows.start + first_token + rows.tokens;  // last position + 1

  prefill_tc_detail::StageQ<kHeadDim>(q, rows, params.num_heads, kv);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t qf[kHeadDim / 16][4];
  TESSERA_UNROLL for (int c = 0; c < kHeadDim / 16; ++c) {
    ptx::LdMatrix<4>(qf[c], kv + (16 * warp + lane % 16) * kStride + 16 * c + 8 * (lane / 16));
  }
  int position[2];
  TESSERA_UNROLL for (int h = 0; h < 2; ++h) {
    position[h] = rows.start + first_token + rows.Token(16 * warp + lane / 4 + 8 * h);
  }
  __syncthreads();  // Q is in registers: the stages may be overwritten

  const int32_t* table = block_tables + size_t(seq) * params.max_blocks_per_seq;
  const auto issue = [&](int tile) {
    T* k_tile = kv + 2 * (tile % kTcStages) * kTileElements;
    prefill_tc_detail::IssueKvTile<kHeadDim>(k_pool, v_pool, table, tile * kTcKeys, block_kv_end,
                                             params.block_size, params.num_kv_heads,
                                             block.kv_head, k_tile, k_tile + kTileElements);
  };
  prefill_tc_detail::TileSoftmax softmax;
  float o[kHeadDim / 8][4] = {};
  const int tiles = (block_kv_end + kTcKeys - 1) / kTcKeys;
  issue(0);
  for (int tile = 0; tile < tiles; ++tile) {
    issue(tile + 1);
    ptx::CpAsyncWait<1>();  // this thread's copies of `tile` have landed
    __syncthreads();        // ... and everyone's, and the zero fills
    const T* k_tile = kv + 2 * (tile % kTcStages) * kTileElements;
    float s[kTcKeys / 8][4];
    prefill_tc_detail::TileScores<kHeadDim>(qf, k_tile, s);
    float rescale[2];
    prefill_tc_detail::TileSoftmaxUpdate(s, tile * kTcKeys, position, params.scale, softmax,
                                         rescale);
    prefill_tc_detail::TileValues<kHeadDim, T>(s, k_tile + kTileElements, rescale, o);
    __syncthreads();  // the stage is free for tile + 2's copies
  }
  ptx::CpAsyncWait<0>();

  TESSERA_UNROLL for (int h = 0; h < 2; ++h) {
    const int r = 16 * warp + lane / 4 + 8 * h;
    if (!rows.Used(r)) continue;
    const size_t token = size_t(query_begin) + first_token + rows.Token(r);
    T* out_row = out + (token * params.num_heads + block.first_head + rows.Head(r)) * kHeadDim;
    const float inv_sum = 1.0f / softmax.sum[h];
    TESSERA_UNROLL for (int d = 0; d < kHeadDim / 8; ++d) {
      *reinterpret_cast<uint32_t*>(out_row + 8 * d + 2 * (lane % 4)) = packed_detail::PackPair<T>(
          o[d][2 * h] * inv_sum, o[d][2 * h + 1] * inv_sum);
    }
  }
}

// The grid and launch of the kernel above (called by LaunchPagedPrefillAttention).
template <class Launcher, typename T, int kHeadDim>
auto LaunchPagedPrefillAttentionTc(Launcher& launcher, const PagedPrefillParams& params, const T* q,
                                   const T* k_pool, const T* v_pool, const int32_t* block_tables,
                                   const int32_t* query_start_loc, const int32_t* context_lens,
                                   T* out) {
  const int group = params.num_heads / params.num_kv_heads;
  const int heads_per_block = group < kTcRows ? group : kTcRows;
  const int chunks = int(CeilDiv(group, kTcRows));
  const int query_len = params.max_query_len > 1 ? params.max_query_len : 1;
  const LaunchShape shape{dim3(params.num_kv_heads * chunks, params.num_seqs,
                               CeilDiv(query_len, kTcRows / heads_per_block)),
                          dim3(kTcThreads), 0};
  return launcher.Launch(shape, PagedPrefillAttentionTcKernel<T, kHeadDim>, q, k_pool,
                         v_pool, block_tables, query_start_loc, context_lens, out, params);
}

}  // namespace tessera::cuda
