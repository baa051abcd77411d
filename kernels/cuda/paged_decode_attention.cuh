// Paged decode attention (one query token per sequence) with split-K over the context
// (flash-decoding), reading K/V through the block table inside the kernel (no gather, no copy).
//
// q, out: [num_seqs, num_heads, head_dim] of T; k_pool, v_pool: [num_blocks, block_size,
// num_kv_heads, head_dim] of T (bf16, f16 or f32); block_tables: [num_seqs,
// max_blocks_per_seq] int32 (logical block -> physical block, any order); context_lens:
// [num_seqs] int32, the number of cached positions the query attends to (its own K/V
// included: write them first, rope_kv_write.cuh).
// out[s][h] = Σ_j softmax_j(scale * q[s][h] · k_j) v_j over j < context_lens[s], with
// k_j = k_pool[table[s][j / block_size]][j % block_size][h / (num_heads / num_kv_heads)] (the GQA
// mapping of kernels/cpu/paged_attention.h). f32 accumulation, one rounding to T at the end.
// A context length of 0 marks a padding row: its output is written as zeros, and neither q nor
// the pools or its block table are read (the combine reads no workspace for it either).
//
// Partitions. The grid is num_seqs x KV-head chunks x num_partitions; a block handles one
// partition of one sequence's context for all the query heads sharing one KV head (up to
// kDecodeMaxHeads; larger GQA ratios take several head chunks), so each K/V row is read once per
// group. Two ways to cut a context:
//   - heuristic (params.partition_size == 0): num_partitions P comes from the step's rows, not its
//     contexts: P = ceil(kDecodeBlocksPerSm x num_sms / (num_seqs x head chunks x KV heads)),
//     capped by ceil(max_context_len / kDecodeSpanAlign) and kDecodeMaxPartitions. Each sequence
//     then cuts its *own* context into spans of ceil(context / P) rounded up to kDecodeSpanAlign
//     keys (DecodeSpan, the same on the device and in the combine). So a CUDA graph captured at
//     the model's context length (max_context_len = 131,072) still puts every block to work on
//     a 512-token context, and the workspace is sized by P, not by the model's context;
//   - forced (partition_size > 0, the runner's batch-invariant mode and tests): partitions of
//     that many keys at fixed positions, ceil(max_context_len / size) of them. A sequence's
//     output bits then depend only on its own q, K/V and length, not on num_seqs,
//     max_context_len, its row in the batch or whether the launch split: each partition's
//     reductions have a fixed shape, the combine merges partitions in order, and a single used
//     partition passes through.
// Partitions past a sequence's context exit at once; the combine merges only the used ones.
//
// Inside a block (kDecodeThreads threads), the partition streams through shared memory in
// stages of kStageKeys keys (8 KiB of K and 8 KiB of V), kDecodeStages deep: while a stage is
// computed, the next one's K and V rows are in flight as 16-byte cp.async copies (ptx_ops.cuh),
// their block-table entries read when the copy is issued, one stage ahead of use. Per stage:
//   1. scores: lanes_per_key = head_dim / 8 lanes per key (rounded up to a power of two: 80 and
//      96 use 16 lanes, 10 or 12 of them reading), 16 bytes of the K row each from shared memory,
//      dotted with every head of the group (q scaled, f32, in shared memory), shuffle-reduced;
//   2. online softmax, a warp per head: running max m and sum l, the stage's p_j = exp(s_j - m')
//      and the rescale exp(m - m') of what came before;
//   3. P·V: a thread owns 2 dims of a slice of the stage's keys for every head, in registers,
//      rescaled per stage; slices are summed through shared memory at the end.
// Unsplit (one partition) the block writes out = o / l directly. Split, it writes o / l, m and
// l per (sequence, head, partition) to an f32 workspace and counts its arrival (an atomic per
// sequence and head group); the group's last block merges its partitions: M = max m_i,
// w_i = l_i exp(m_i - M), out = Σ w_i o_i / Σ w_i (decode_detail::CombineIfLast; a separate
// combine launch before, ~5 µs above an empty kernel per layer at batch 1 on an H200, ncu).
// Head dims: 32 (the tiny test models), 64, 80, 96, 128, 256. Static shared memory only:
// 2 stages x 16 KiB + q + the stage's scores <= 41 KiB (head_dim 256), under the 48 KiB default.
//
// Bound (H100): memory. Bytes = Σ_s context_len_s x num_kv_heads x head_dim x 2 (K and V) x
// sizeof(T) ÷ 3.35 TB/s (e.g. 32 sequences x 2048 tokens x 8 KV heads x 128 x bf16: 256 MiB,
// ~80 µs). Each K/V byte is read once per head chunk, by 16-byte copies; with kDecodeBlocksPerSm
// blocks per SM each keeping a 16 KiB stage in flight, an SM has >= 64 KiB of loads outstanding
// (Little's law needs ~15 KiB per SM at 3.35 TB/s and ~600 ns); the workspace traffic
// (heads x head_dim f32 per partition) is <= 1/16 of the K/V bytes of a 64-key span at GQA 8.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/attention_block_heads.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/launch_status.h"
#include "kernels/cuda/ptx_ops.cuh"

namespace tessera::cuda {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeMaxHeads = 8;        // query heads per block
inline constexpr int kDecodeSpanAlign = 64;      // heuristic spans are multiples of this
inline constexpr int kDecodeBlocksPerSm = 4;     // the heuristic's aim for the grid
inline constexpr int kDecodeMaxPartitions = 256;
inline constexpr int kDecodeStages = 2;          // cp.async pipeline depth
inline constexpr int kDecodeStageBytes = 8192;   // of K rows (and of V rows) per stage, at most

struct PagedDecodeParams {
  int num_seqs = 0;
  int num_heads = 0;     // query heads, a multiple of num_kv_heads
  int num_kv_heads = 0;
  int block_size = 0;    // tokens per pool block, >= 1
  int max_blocks_per_seq = 0;
  int max_context_len = 0;  // >= every context_lens[s]; host-side knowledge of the step
  float scale = 0;          // usually 1 / sqrt(head_dim)
  int num_sms = 132;        // H100 SXM
  int partition_size = 0;   // 0: the heuristic; > 0 forces partitions of that many keys
  // The most sequences of any launch that shares this workspace (0: num_seqs): sizes the arrival
  // counters at its start, which must stay where they are from launch to launch.
  int max_num_seqs = 0;
};

struct DecodePartitioning {
  int partition_size = 0;  // > 0: forced, fixed positions; 0: per-sequence spans (DecodeSpan)
  int num_partitions = 1;  // per sequence, the grid's z; 1 = no split, no combine
};

inline int DecodeHeadsPerBlock(const PagedDecodeParams& p) {
  const int group = p.num_heads / p.num_kv_heads;
  return group < kDecodeMaxHeads ? group : kDecodeMaxHeads;
}

inline int DecodeHeadChunks(const PagedDecodeParams& p) {
  return int(CeilDiv(p.num_heads / p.num_kv_heads, kDecodeMaxHeads));
}

inline DecodePartitioning PlanPagedDecode(const PagedDecodeParams& p) {
  const int context = p.max_context_len > 1 ? p.max_context_len : 1;
  if (p.partition_size > 0) {
    return DecodePartitioning{p.partition_size, int(CeilDiv(context, p.partition_size))};
  }
  const int base_blocks = p.num_seqs * p.num_kv_heads * DecodeHeadChunks(p);
  int parts = int(CeilDiv(kDecodeBlocksPerSm * p.num_sms, base_blocks > 0 ? base_blocks : 1));
  const int longest = int(CeilDiv(context, kDecodeSpanAlign));
  parts = parts < longest ? parts : longest;
  parts = parts < kDecodeMaxPartitions ? parts : kDecodeMaxPartitions;
  return DecodePartitioning{0, parts > 1 ? parts : 1};
}

// The keys each partition of a sequence with `context` keys covers (the last one may be short).
__host__ __device__ inline int DecodeSpan(int context, DecodePartitioning plan) {
  if (plan.partition_size > 0) return plan.partition_size;
  const int even = (context + plan.num_partitions - 1) / plan.num_partitions;
  const int span = (even + kDecodeSpanAlign - 1) / kDecodeSpanAlign * kDecodeSpanAlign;
  return span > 0 ? span : kDecodeSpanAlign;
}

// 32-bit words of arrival counters at the workspace's start: one per (sequence, block head
// group) of the largest launch, rounded up to 16 bytes.
inline size_t DecodeArrivalWords(const PagedDecodeParams& p) {
  const int seqs = p.max_num_seqs > p.num_seqs ? p.max_num_seqs : p.num_seqs;
  return (size_t(seqs) * p.num_kv_heads * DecodeHeadChunks(p) + 3) / 4 * 4;
}

// The workspace the split path needs (0 when unsplit), in floats: the arrival counters
// (DecodeArrivalWords, zero before the first launch; every launch leaves them zero), then partial
// max and sum [num_seqs, num_heads, partitions] and partial outputs [num_seqs, num_heads,
// partitions, head_dim] in f32.
inline size_t PagedDecodeWorkspaceFloats(const PagedDecodeParams& p, int head_dim) {
  const DecodePartitioning plan = PlanPagedDecode(p);
  if (plan.num_partitions == 1) return 0;
  return DecodeArrivalWords(p) +
         size_t(p.num_seqs) * p.num_heads * plan.num_partitions * (2 + size_t(head_dim));
}

struct DecodeWorkspace {
  uint32_t* arrivals = nullptr;  // [num_seqs, grid x]; nullptr when unsplit
  float* max = nullptr;          // [num_seqs, num_heads, partitions]
  float* sum = nullptr;
  float* out = nullptr;  // [num_seqs, num_heads, partitions, head_dim]
};

template <typename T>
struct alignas(16) Vec8 {
  T v[8];
};
template <typename T>
struct alignas(2 * sizeof(T)) Vec2 {
  T v[2];
};

namespace decode_detail {

// Lanes that read one key row in StageScores: head_dim / 8 (8 elements each) rounded up to a
// power of two (80 and 96 -> 16 lanes, 10 or 12 of them reading); 64 -> 8, 128 -> 16, 256 -> 32.
template <int kHeadDim>
inline constexpr int kDecodeLanesPerKey =
    kHeadDim / 8 <= 8 ? 8 : (kHeadDim / 8 <= 16 ? 16 : 32);

// Threads summing P·V over one slice of a stage's keys (2 dims each) and the slices per block:
// 64 -> 2 slices of 64 threads, 128 -> 1 of 128, 256 -> 1 of 128 (2 dims x 128 = 256),
// 80 -> 3 of 40 (8 threads idle), 96 -> 2 of 48 (32 idle), 32 -> 8 of 16.
template <int kHeadDim>
inline constexpr int kDecodeSlices = kDecodeThreads / (kHeadDim / 2);

// Keys per pipeline stage: the largest power of two in [8, 64] whose rows fit kDecodeStageBytes
// (bf16: 32 at head_dim 128, 16 at 256, 64 at 64; f32: 8 at 256).
template <typename T, int kHeadDim>
inline constexpr int kStageKeys =
    64 * kHeadDim * int(sizeof(T)) <= kDecodeStageBytes   ? 64
    : 32 * kHeadDim * int(sizeof(T)) <= kDecodeStageBytes ? 32
    : 16 * kHeadDim * int(sizeof(T)) <= kDecodeStageBytes ? 16
                                                          : 8;

// Where key position `pos` of the sequence lives in a pool: the row of `kv_head`.
template <int kHeadDim, typename T>
__device__ __forceinline__ const T* KvRow(const T* pool, const int32_t* table, int pos,
                                          int block_size, int num_kv_heads, int kv_head) {
  const int64_t physical = __ldg(&table[pos / block_size]);
  const int64_t slot = physical * block_size + pos % block_size;
  return pool + (slot * num_kv_heads + kv_head) * kHeadDim;
}

// The part of one block's work that does not change over its stages.
struct DecodeRows {
  const int32_t* table;
  int begin;  // the partition's first key position
  int count;  // its keys
  int block_size, num_kv_heads, kv_head;
};

// Issues stage `stage`'s K and V rows (16-byte cp.async copies, the block's threads striding
// over the chunks) into buffer stage % kDecodeStages, then commits a group (an empty one past
// the last stage, so every thread's group count stays in step with the loop).
template <typename T, int kHeadDim, int kStageKeys>
__device__ __forceinline__ void IssueStage(const T* k_pool, const T* v_pool, const DecodeRows& r,
                                           int stage, T* k_stages, T* v_stages) {
  constexpr int kElementsPerChunk = 16 / int(sizeof(T));
  constexpr int kChunksPerRow = kHeadDim / kElementsPerChunk;
  const int first = stage * kStageKeys;
  if (first < r.count) {
    const int left = r.count - first;
    const int keys = left < kStageKeys ? left : kStageKeys;
    const size_t buffer = size_t(stage % kDecodeStages) * kStageKeys * kHeadDim;
    // Thread t copies chunk t % kChunksPerRow of keys t / kChunksPerRow + i x kKeysPerPass:
    // one block-table read per key it copies, a constant trip count.
    constexpr int kKeysPerPass = kDecodeThreads / kChunksPerRow;
    constexpr int kPasses = (kStageKeys + kKeysPerPass - 1) / kKeysPerPass;
    const int element = int(threadIdx.x % kChunksPerRow) * kElementsPerChunk;
    const int first_key = int(threadIdx.x / kChunksPerRow);
    TESSERA_UNROLL for (int i = 0; i < kPasses; ++i) {
      const int key = first_key + i * kKeysPerPass;
      if (first_key >= kKeysPerPass || key >= keys) break;
      const size_t at = buffer + size_t(key) * kHeadDim + element;
      const size_t row = KvRow<kHeadDim>(k_pool, r.table, r.begin + first + key, r.block_size,
                                         r.num_kv_heads, r.kv_head) - k_pool;
      ptx::CpAsync16(k_stages + at, k_pool + row + element);
      ptx::CpAsync16(v_stages + at, v_pool + row + element);
    }
  }
  ptx::CpAsyncCommit();
}

// Step 1: scores[g][j] = q_scaled[g] · k_j for the stage's `keys` rows in shared memory.
template <int kHeadDim, typename T>
__device__ __forceinline__ void StageScores(const float* q_shared, const T* k_stage, int keys,
                                            int heads, int scores_stride, float* scores) {
  constexpr int kLanesPerKey = kDecodeLanesPerKey<kHeadDim>;
  constexpr int kKeysPerWarp = 32 / kLanesPerKey;
  constexpr int kChunks = kHeadDim / 8;  // lanes with chunk >= kChunks read nothing, add 0
  const int lane = threadIdx.x % 32;
  const int chunk = lane % kLanesPerKey;  // 8 dims of the row
  const int keys_per_pass = (blockDim.x / 32) * kKeysPerWarp;
  const int first = (threadIdx.x / 32) * kKeysPerWarp + lane / kLanesPerKey;
  for (int base = 0; base < keys; base += keys_per_pass) {  // warp-uniform trip count
    const int j = base + first;
    float k[8] = {};
    if (j < keys && chunk < kChunks) {
      const Vec8<T> row = *reinterpret_cast<const Vec8<T>*>(k_stage + j * kHeadDim + chunk * 8);
      for (int i = 0; i < 8; ++i) k[i] = ToFloat(row.v[i]);
    }
    for (int g = 0; g < kDecodeMaxHeads; ++g) {
      if (g >= heads) break;
      float dot = 0.0f;
      if (chunk < kChunks) {
        const float4* q4 = reinterpret_cast<const float4*>(q_shared + g * kHeadDim + chunk * 8);
        const float4 a = q4[0], b = q4[1];
        dot = a.x * k[0] + a.y * k[1] + a.z * k[2] + a.w * k[3] + b.x * k[4] + b.y * k[5] +
              b.z * k[6] + b.w * k[7];
      }
      for (int offset = kLanesPerKey / 2; offset > 0; offset >>= 1) {
        dot += __shfl_xor_sync(0xFFFFFFFFu, dot, offset);
      }
      if (chunk == 0 && j < keys) scores[g * scores_stride + j] = dot;
    }
  }
}

// The running softmax state of each head of the block (shared memory).
struct OnlineSoftmax {
  float* max;    // m: the largest score so far
  float* sum;    // l: Σ exp(s - m) so far
  float* scale;  // exp(m_before - m) of the last stage: what earlier sums and outputs are scaled by
};

// Step 2: a warp per head turns the stage's scores into exp(s - m') and updates m and l.
__device__ __forceinline__ void StageSoftmax(float* scores, int scores_stride, int keys,
                                             int heads, OnlineSoftmax state) {
  const int lane = threadIdx.x % 32;
  for (int g = threadIdx.x / 32; g < heads; g += blockDim.x / 32) {
    float* row = scores + g * scores_stride;
    float stage_max = -INFINITY;
    for (int j = lane; j < keys; j += 32) stage_max = fmaxf(stage_max, row[j]);
    const float before = state.max[g];
    const float m = fmaxf(before, WarpMax(stage_max));
    float l = 0.0f;
    for (int j = lane; j < keys; j += 32) {
      const float p = __expf(row[j] - m);
      row[j] = p;
      l += p;
    }
    l = WarpSum(l);
    __syncwarp();  // every lane has read state.max[g] before lane 0 overwrites it
    if (lane == 0) {
      const float scale = __expf(before - m);  // 0 on the first stage (before = -inf)
      state.scale[g] = scale;
      state.sum[g] = state.sum[g] * scale + l;
      state.max[g] = m;
    }
  }
}

// Step 3: this thread's 2 dims of Σ_j p[g][j] v_j over its slice of the stage's keys, added to
// acc after rescaling it by the stage's softmax scale.
template <int kHeadDim, typename T>
__device__ __forceinline__ void StageValues(const float* probs, int probs_stride,
                                            const T* v_stage, int keys, int heads,
                                            const float* scale, float (&acc)[kDecodeMaxHeads][2]) {
  constexpr int kThreadsPerRow = kHeadDim / 2;
  constexpr int kSlices = kDecodeSlices<kHeadDim>;
  const int slice = threadIdx.x / kThreadsPerRow;
  const int d = (threadIdx.x % kThreadsPerRow) * 2;
  if (slice >= kSlices) return;  // the idle threads of head_dim 80 / 96
  for (int g = 0; g < kDecodeMaxHeads; ++g) {
    if (g >= heads) break;
    acc[g][0] *= scale[g];
    acc[g][1] *= scale[g];
  }
  for (int j = slice; j < keys; j += kSlices) {
    const Vec2<T> pair = *reinterpret_cast<const Vec2<T>*>(v_stage + j * kHeadDim + d);
    const float v0 = ToFloat(pair.v[0]), v1 = ToFloat(pair.v[1]);
    for (int g = 0; g < kDecodeMaxHeads; ++g) {
      if (g >= heads) break;
      const float p = probs[g * probs_stride + j];
      acc[g][0] += p * v0;
      acc[g][1] += p * v1;
    }
  }
}

// Merges the `used` partitions of one (sequence, head) from the workspace into out (the row
// `row` = sequence x num_heads + head): M = max m_i, w_i = l_i exp(m_i - M), out = Σ w_i o_i /
// Σ w_i, in partition order. One used partition passes its o / l through (the bits the unsplit
// kernel writes). The block's threads stride over the dims; other blocks' partials are read
// from L2 (__ldcg).
template <typename T, int kHeadDim>
__device__ __forceinline__ void CombineRow(const DecodeWorkspace& workspace, T* out, size_t row,
                                           int used, const DecodePartitioning& plan) {
  const size_t first = row * plan.num_partitions;
  if (used == 1) {
    for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
      out[row * kHeadDim + d] = FromFloat<T>(__ldcg(&workspace.out[first * kHeadDim + d]));
    }
    return;
  }
  float m = -INFINITY;
  for (int i = 0; i < used; ++i) m = fmaxf(m, __ldcg(&workspace.max[first + i]));
  for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
    float total = 0.0f, o = 0.0f;
    for (int i = 0; i < used; ++i) {
      const float w =
          __ldcg(&workspace.sum[first + i]) * __expf(__ldcg(&workspace.max[first + i]) - m);
      total += w;
      o += w * __ldcg(&workspace.out[(first + i) * kHeadDim + d]);
    }
    out[row * kHeadDim + d] = FromFloat<T>(o / total);
  }
}

// After a split block wrote its partials: counts its arrival for its (sequence, head group), and
// the block that arrives last of the `used` ones merges the group's heads (CombineRow) and puts
// the counter back to zero for the next launch. The fences order each block's partials before its
// arrival and the last block's reads after it (CUDA's threadFenceReduction pattern).
template <typename T, int kHeadDim>
__device__ __forceinline__ void CombineIfLast(const DecodeWorkspace& workspace, T* out, int seq,
                                              int first_head, int heads, int used,
                                              int num_heads, const DecodePartitioning& plan) {
  TESSERA_SHARED(int, last, 1);
  __threadfence();
  __syncthreads();  // every thread's partials are written and fenced
  uint32_t* const arrival = workspace.arrivals + size_t(seq) * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) *last = atomicAdd(arrival, 1u) == uint32_t(used - 1);
  __syncthreads();
  if (!*last) return;
  __threadfence();
  for (int g = 0; g < heads; ++g) {
    CombineRow<T, kHeadDim>(workspace, out, size_t(seq) * num_heads + first_head + g, used, plan);
  }
  if (threadIdx.x == 0) *arrival = 0u;
}

}  // namespace decode_detail

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kDecodeThreads, kDecodeBlocksPerSm)
    PagedDecodeAttentionKernel(const T* __restrict__ q, const T* __restrict__ k_pool,
                               const T* __restrict__ v_pool,
                               const int32_t* __restrict__ block_tables,
                               const int32_t* __restrict__ context_lens, T* __restrict__ out,
                               DecodeWorkspace workspace, PagedDecodeParams params,
                               DecodePartitioning plan) {
  ptx::GridDependencyWait();  // a dependent launch (LaunchShape::dependent)
  ptx::LaunchDependents();
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 2 * kDecodeThreads);
  constexpr int kStageKeys = decode_detail::kStageKeys<T, kHeadDim>;
  constexpr int kSlices = decode_detail::kDecodeSlices<kHeadDim>;
  constexpr int kStageElements = kDecodeStages * kStageKeys * kHeadDim;  // of K, and of V
  static_assert(kSlices >= 1 && kHeadDim / 8 <= decode_detail::kDecodeLanesPerKey<kHeadDim>);
  static_assert(kSlices * kDecodeMaxHeads * kHeadDim * sizeof(float) <=
                2 * kStageElements * sizeof(T));
  // The K and V stages share one buffer with the P·V slices, which are written only after the
  // last stage has been read.
  TESSERA_SHARED(float4, kv_stages, 2 * kStageElements * sizeof(T) / sizeof(float4));
  T* const k_stages = reinterpret_cast<T*>(kv_stages);
  T* const v_stages = k_stages + kStageElements;
  float* const slices = reinterpret_cast<float*>(kv_stages);
  TESSERA_SHARED(float, q_shared, kDecodeMaxHeads * kHeadDim);
  TESSERA_SHARED(float, scores, kDecodeMaxHeads * kStageKeys);  // then the stage's p_j
  TESSERA_SHARED(float, head_max, kDecodeMaxHeads);
  TESSERA_SHARED(float, head_sum, kDecodeMaxHeads);
  TESSERA_SHARED(float, head_scale, kDecodeMaxHeads);

  const AttentionBlockHeads block =
      BlockHeads(params.num_heads, params.num_kv_heads, kDecodeMaxHeads);
  const int kv_head = block.kv_head, first_head = block.first_head, heads = block.heads;
  const int seq = blockIdx.y;
  const int context = __ldg(&context_lens[seq]);
  const int span = DecodeSpan(context, plan);
  const int begin = int(blockIdx.z) * span;
  const int remaining = context - begin;
  const int count = remaining < span ? remaining : span;
  const size_t q_row = (size_t(seq) * params.num_heads + first_head) * kHeadDim;
  const bool split = plan.num_partitions > 1;

  if (count <= 0) {  // past this sequence's context: nothing, or zeros for a padding row
    if (context == 0 && blockIdx.z == 0) {
      for (int i = threadIdx.x; i < heads * kHeadDim; i += blockDim.x) {
        out[q_row + i] = FromFloat<T>(0.0f);
      }
    }
    return;
  }
  const decode_detail::DecodeRows rows{block_tables + size_t(seq) * params.max_blocks_per_seq,
                                       begin, count, params.block_size, params.num_kv_heads,
                                       kv_head};
  for (int s = 0; s < kDecodeStages - 1; ++s) {
    decode_detail::IssueStage<T, kHeadDim, kStageKeys>(k_pool, v_pool, rows, s, k_stages,
                                                       v_stages);
  }
  for (int i = threadIdx.x; i < heads * kHeadDim; i += blockDim.x) {
    q_shared[i] = ToFloat(q[q_row + i]) * params.scale;
  }
  if (threadIdx.x < kDecodeMaxHeads) {
    head_max[threadIdx.x] = -INFINITY;
    head_sum[threadIdx.x] = 0.0f;
  }
  const decode_detail::OnlineSoftmax softmax{head_max, head_sum, head_scale};
  float acc[kDecodeMaxHeads][2] = {};
  const int stages = (count + kStageKeys - 1) / kStageKeys;
  for (int s = 0; s < stages; ++s) {
    decode_detail::IssueStage<T, kHeadDim, kStageKeys>(k_pool, v_pool, rows,
                                                       s + kDecodeStages - 1, k_stages, v_stages);
    ptx::CpAsyncWait<kDecodeStages - 1>();  // this thread's copies of stage s have landed
    __syncthreads();                          // ... and everyone's (q and the state too)
    const int left = count - s * kStageKeys;
    const int keys = left < kStageKeys ? left : kStageKeys;
    const size_t buffer = size_t(s % kDecodeStages) * kStageKeys * kHeadDim;
    decode_detail::StageScores<kHeadDim>(q_shared, k_stages + buffer, keys, heads, kStageKeys,
                                         scores);
    __syncthreads();
    decode_detail::StageSoftmax(scores, kStageKeys, keys, heads, softmax);
    __syncthreads();
    decode_detail::StageValues<kHeadDim>(scores, kStageKeys, v_stages + buffer, keys, heads,
                                         head_scale, acc);
    __syncthreads();  // the buffer is free for stage s + kDecodeStages's copies
  }
  ptx::CpAsyncWait<0>();  // only empty groups are left; the buffer becomes the slices

  const int slice = threadIdx.x / (kHeadDim / 2);
  const int d = (threadIdx.x % (kHeadDim / 2)) * 2;
  if (slice < kSlices) {
    for (int g = 0; g < kDecodeMaxHeads; ++g) {  // constant bounds: acc stays in registers
      if (g >= heads) break;
      float* at = slices + (slice * kDecodeMaxHeads + g) * kHeadDim + d;
      at[0] = acc[g][0];
      at[1] = acc[g][1];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < heads * kHeadDim; i += blockDim.x) {
    const int g = i / kHeadDim, dim = i % kHeadDim;
    float o = 0.0f;
    for (int s = 0; s < kSlices; ++s) o += slices[(s * kDecodeMaxHeads + g) * kHeadDim + dim];
    o /= head_sum[g];
    if (!split) {
      out[q_row + i] = FromFloat<T>(o);
    } else {
      const size_t part = (size_t(seq) * params.num_heads + first_head + g) *
                              plan.num_partitions + blockIdx.z;
      workspace.out[part * kHeadDim + dim] = o;
      if (dim == 0) {
        workspace.max[part] = head_max[g];
        workspace.sum[part] = head_sum[g];
      }
    }
  }
  if (split) {
    decode_detail::CombineIfLast<T, kHeadDim>(workspace, out, seq, first_head, heads,
                                              (context + span - 1) / span, params.num_heads,
                                              plan);
  }
}
// Preconditions: shapes above; num_heads % num_kv_heads == 0; every context_lens[s] <=
// params.max_context_len and <= max_blocks_per_seq x block_size, with table entries for those
// positions in [0, num_blocks); pointers 16-byte aligned; when PagedDecodeWorkspaceFloats(params,
// kHeadDim) > 0, `workspace` holds that many floats, its first DecodeArrivalWords zero before
// the first launch (every launch leaves them zero; else it may be nullptr); out overlaps nothing.
// One launch: when split, the last block of each (sequence, head group) merges the partitions.
template <class Launcher, typename T, int kHeadDim>
auto LaunchPagedDecodeAttention(Launcher& launcher, const PagedDecodeParams& params, const T* q,
                                const T* k_pool, const T* v_pool, const int32_t* block_tables,
                                const int32_t* context_lens, T* out, float* workspace) {
  const DecodePartitioning plan = PlanPagedDecode(params);
  DecodeWorkspace parts;
  if (plan.num_partitions > 1) {
    const size_t per_value = size_t(params.num_seqs) * params.num_heads * plan.num_partitions;
    float* const partials = workspace + DecodeArrivalWords(params);
    parts = DecodeWorkspace{reinterpret_cast<uint32_t*>(workspace), partials,
                            partials + per_value, partials + 2 * per_value};
  }
  const LaunchShape shape{
      dim3(params.num_kv_heads * DecodeHeadChunks(params), params.num_seqs, plan.num_partitions),
      dim3(kDecodeThreads), 0, /*dependent=*/true};
  return launcher.Launch(shape, PagedDecodeAttentionKernel<T, kHeadDim>, q, k_pool, v_pool,
                         block_tables, context_lens, out, parts, params, plan);
}

}  // namespace tessera::cuda
