// Paged decode attention (one query token per sequence) with split-K over the context
// (flash-decoding), reading K/V through the block table inside the kernel (no gather, no copy).
//
// q, out: [num_seqs, num_heads, head_dim] of T; k_pool, v_pool: [num_blocks, block_size,
// num_kv_heads, head_dim] of T (bf16, f16 or f32); block_tables: [num_seqs,
// max_blocks_per_seq] int32 (logical block -> physical block, any order); context_lens:
// [num_seqs] int32, the number of cached positions the query attends to (its own K/V
// included: write them first, kv_write.cuh).
// out[s][h] = Σ_j softmax_j(scale * q[s][h] · k_j) v_j over j < context_lens[s], with
// k_j = k_pool[table[s][j / block_size]][j % block_size][h / (num_heads / num_kv_heads)] (the GQA
// mapping of kernels/cpu/paged_attention.h). f32 accumulation, one rounding to T at the end.
// T: bf16, f16 or f32 (the runner's --dtype f32).
// A context length of 0 marks a padding row: its output is written as zeros, and neither q nor
// the pools or its block table are read (the combine reads no workspace for it either).
//
// Facts the CUDA runner relies on (tested):
//   - max_context_len may far exceed every context_lens[s] (a CUDA graph captured at the model's
//     context length): partitions past a sequence's length exit at once, the combine merges
//     only the used ones, results equal the reference.
//   - batch invariance: with params.partition_size forced (e.g. 512, the runner's
//     batch-invariant mode) a sequence's output bits depend only on its own q, K/V and length,
//     not on num_seqs, max_context_len, its row in the batch or whether the launch split:
//     partition boundaries are fixed positions, each partition's reductions have a fixed shape,
//     the combine merges partitions in order, and a single used partition passes through.
//
// Design. A block (kDecodeThreads threads) handles one (sequence, KV head, partition of the
// context) and all the query heads that share that KV head (up to kDecodeMaxHeads per block;
// larger GQA ratios take several head chunks), so each K/V row is read once per group:
//   1. q of the group, times scale, to shared memory as f32;
//   2. scores: lanes_per_key = head_dim / 8 lanes per key (rounded up to a power of two: 80
//      and 96 use 16 lanes, 10 or 12 of them loading), each loads 16 bytes of the K row (a key
//      row is one coalesced segment), dots with every head of the group and reduces with
//      shuffles; scores to shared memory [heads][partition_size];
//   3. softmax per head (a warp per head): partition max m, p_j = exp(s_j - m), sum l;
//   4. P·V: a thread owns 2 dims (4-byte loads, a warp covers 128 contiguous bytes of a V row)
//      for a slice of the keys and all heads; slices summed through shared memory (in q's
//      buffer, dead by then).
// Head dims: 64, 128, 256 (Qwen3-Next / Qwen3.5 full attention), 80 and 96 (the last two leave
// some lanes / threads idle in steps 2 and 4), 32 (the tiny test models: 8 lanes per key with 4
// loading, 8 P·V slices). Shared memory at 256: 8 KiB static + the scores,
// 8 heads x 1024 x 4 B = 32 KiB, within the 48 KiB default.
// Unsplit (one partition) the block writes out = o / l directly. Split, it writes o / l, m and
// l per (sequence, head, partition) to an f32 workspace, and PagedDecodeCombineKernel merges
// the partitions: M = max m_i, w_i = l_i exp(m_i - M), out = Σ w_i o_i / Σ w_i.
//
// Partitioning (PlanPagedDecode): the grid is num_seqs x kv head chunks x partitions. The aim is
// at least 2 blocks per SM (2 x num_sms, 132 on H100) so every SM streams K/V.
//   - max_context_len <= kDecodeMinPartition (256), or num_seqs x head chunks already >=
//     2 x num_sms: no split if the context fits one partition (<= kDecodeMaxPartition, 1024, the
//     shared-memory cap for the scores), else partitions of kDecodeMaxPartition;
//   - otherwise partitions = ceil(2 x num_sms / (num_seqs x head chunks)), the partition size is
//     ceil(max_context_len / partitions) rounded up to 256 and clamped to [256, 1024].
// Short sequences of a ragged batch skip the partitions past their length (empty blocks exit).
// A caller (a test) may force the partition size.
//
// Bound (H100): memory. Bytes = Σ_s context_len_s x num_kv_heads x head_dim x 2 (K and V) x
// sizeof(T), ÷ 3.35 TB/s (e.g. 32 sequences x 2048 tokens x 8 KV heads x 128 x bf16: 256 MiB,
// ~80 µs). Each K/V byte is read once per head chunk with 16-/4-byte coalesced loads; the
// workspace traffic (num_heads x head_dim f32 per partition) is < 2% of the K/V bytes at
// partition 256 and head_dim 128; enough blocks (>= 2 per SM) keep the loads in flight.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/launch_status.h"

namespace tessera::cuda {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeMaxHeads = 8;  // query heads per block
inline constexpr int kDecodeMinPartition = 256;
inline constexpr int kDecodeMaxPartition = 1024;
inline constexpr int kDecodeCombineThreads = 128;

struct PagedDecodeParams {
  int num_seqs = 0;
  int num_heads = 0;     // query heads, a multiple of num_kv_heads
  int num_kv_heads = 0;
  int block_size = 0;    // tokens per pool block, >= 1
  int max_blocks_per_seq = 0;
  int max_context_len = 0;  // >= every context_lens[s]; host-side knowledge of the step
  float scale = 0;          // usually 1 / sqrt(head_dim)
  int num_sms = 132;        // H100 SXM
  int partition_size = 0;   // 0: PlanPagedDecode's heuristic; > 0 forces it (tests), at most
                            // kDecodeMaxPartition (larger values are clamped)
};

struct DecodePartitioning {
  int partition_size = 0;
  int num_partitions = 1;  // per sequence, for max_context_len; 1 = no split, no combine
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
  int size = p.partition_size < kDecodeMaxPartition ? p.partition_size : kDecodeMaxPartition;
  if (size <= 0) {
    const int base_blocks = p.num_seqs * p.num_kv_heads * DecodeHeadChunks(p);
    const int target_blocks = 2 * p.num_sms;
    if (context <= kDecodeMinPartition || base_blocks >= target_blocks) {
      size = context <= kDecodeMaxPartition ? int(CeilDiv(context, 32)) * 32 : kDecodeMaxPartition;
    } else {
      const int wanted = int(CeilDiv(target_blocks, base_blocks));
      size = int(CeilDiv(CeilDiv(context, wanted), kDecodeMinPartition)) * kDecodeMinPartition;
      size = size < kDecodeMaxPartition ? size : kDecodeMaxPartition;
    }
  }
  return DecodePartitioning{size, int(CeilDiv(context, size))};
}

// f32 workspace the split path needs (0 when unsplit): partial max and sum [num_seqs, num_heads,
// partitions] and partial outputs [num_seqs, num_heads, partitions, head_dim].
inline size_t PagedDecodeWorkspaceFloats(const PagedDecodeParams& p, int head_dim) {
  const DecodePartitioning plan = PlanPagedDecode(p);
  if (plan.num_partitions == 1) return 0;
  return size_t(p.num_seqs) * p.num_heads * plan.num_partitions * (2 + size_t(head_dim));
}

// Dynamic shared memory of the main kernel: the scores [heads_per_block][partition_size].
inline size_t PagedDecodeSharedBytes(const PagedDecodeParams& p) {
  return sizeof(float) * size_t(DecodeHeadsPerBlock(p)) * PlanPagedDecode(p).partition_size;
}

struct DecodeWorkspace {
  float* max = nullptr;  // [num_seqs, num_heads, partitions]; nullptr when unsplit
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

// Lanes that read one key row in Scores: head_dim / 8 (16 bytes each) rounded up to a power of
// two (80 and 96 -> 16 lanes, 10 or 12 of them loading); 64 -> 8, 128 -> 16, 256 -> 32.
template <int kHeadDim>
inline constexpr int kDecodeLanesPerKey =
    kHeadDim / 8 <= 8 ? 8 : (kHeadDim / 8 <= 16 ? 16 : 32);

// Threads summing P·V over one slice of the keys (2 dims each) and the slices per block:
// 64 -> 2 slices of 64 threads, 128 -> 1 of 128, 256 -> 1 of 128 (2 dims x 128 = 256),
// 80 -> 3 of 40 (8 threads idle), 96 -> 2 of 48 (32 idle).
template <int kHeadDim>
inline constexpr int kDecodeSlices = kDecodeThreads / (kHeadDim / 2);

// Where key position `pos` of the sequence lives in a pool: the row of `kv_head`.
template <int kHeadDim, typename T>
__device__ __forceinline__ const T* KvRow(const T* pool, const int32_t* table, int pos,
                                          int block_size, int num_kv_heads, int kv_head) {
  const int64_t physical = __ldg(&table[pos / block_size]);
  const int64_t slot = physical * block_size + pos % block_size;
  return pool + (slot * num_kv_heads + kv_head) * kHeadDim;
}

// Step 2: scores[g][j] = q_scaled[g] · k_{begin + j} for j < count.
template <int kHeadDim, typename T>
__device__ __forceinline__ void Scores(const float* q_shared, const T* k_pool,
                                       const int32_t* table, int begin, int count, int heads,
                                       int block_size, int num_kv_heads, int kv_head,
                                       int scores_stride, float* scores) {
  constexpr int kLanesPerKey = kDecodeLanesPerKey<kHeadDim>;
  constexpr int kKeysPerWarp = 32 / kLanesPerKey;
  constexpr int kChunks = kHeadDim / 8;  // lanes with chunk >= kChunks load nothing, add 0
  const int lane = threadIdx.x % 32;
  const int chunk = lane % kLanesPerKey;  // 8 dims of the row
  const int keys_per_pass = (blockDim.x / 32) * kKeysPerWarp;
  const int first = (threadIdx.x / 32) * kKeysPerWarp + lane / kLanesPerKey;
  for (int base = 0; base < count; base += keys_per_pass) {  // warp-uniform trip count
    const int j = base + first;
    float k[8] = {};
    if (j < count && chunk < kChunks) {
      const Vec8<T> row = *reinterpret_cast<const Vec8<T>*>(
          KvRow<kHeadDim>(k_pool, table, begin + j, block_size, num_kv_heads, kv_head) +
          chunk * 8);
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
      if (chunk == 0 && j < count) scores[g * scores_stride + j] = dot;
    }
  }
}

// Step 3: a warp per head turns its scores into exp(s - m); max and sum to max_out/sum_out.
__device__ __forceinline__ void Softmax(float* scores, int scores_stride, int count, int heads,
                                        float* max_out, float* sum_out) {
  const int lane = threadIdx.x % 32;
  for (int g = threadIdx.x / 32; g < heads; g += blockDim.x / 32) {
    float* row = scores + g * scores_stride;
    float m = -INFINITY;
    for (int j = lane; j < count; j += 32) m = fmaxf(m, row[j]);
    m = WarpMax(m);
    float l = 0.0f;
    for (int j = lane; j < count; j += 32) {
      const float p = __expf(row[j] - m);
      row[j] = p;
      l += p;
    }
    l = WarpSum(l);
    if (lane == 0) {
      max_out[g] = m;
      sum_out[g] = l;
    }
  }
}

// Step 4: this thread's 2 dims of Σ_j p[g][j] v_j over its slice of the keys, for every head,
// summed over slices into reduced[g][d] (shared).
template <int kHeadDim, typename T>
__device__ __forceinline__ void WeightedValues(const float* probs, int probs_stride,
                                               const T* v_pool, const int32_t* table, int begin,
                                               int count, int heads, int block_size,
                                               int num_kv_heads, int kv_head, float* slices) {
  constexpr int kThreadsPerRow = kHeadDim / 2;
  constexpr int kSlices = kDecodeSlices<kHeadDim>;
  const int slice = threadIdx.x / kThreadsPerRow;
  const int d = (threadIdx.x % kThreadsPerRow) * 2;
  if (slice >= kSlices) return;  // the idle threads of head_dim 80 / 96
  float acc[kDecodeMaxHeads][2] = {};
  for (int j = slice; j < count; j += kSlices) {
    const Vec2<T> pair = *reinterpret_cast<const Vec2<T>*>(
        KvRow<kHeadDim>(v_pool, table, begin + j, block_size, num_kv_heads, kv_head) + d);
    const float v0 = ToFloat(pair.v[0]), v1 = ToFloat(pair.v[1]);
    for (int g = 0; g < kDecodeMaxHeads; ++g) {
      if (g >= heads) break;
      const float p = probs[g * probs_stride + j];
      acc[g][0] += p * v0;
      acc[g][1] += p * v1;
    }
  }
  for (int g = 0; g < kDecodeMaxHeads; ++g) {
    if (g >= heads) break;
    float* at = slices + (slice * kDecodeMaxHeads + g) * kHeadDim + d;
    at[0] = acc[g][0];
    at[1] = acc[g][1];
  }
}

}  // namespace decode_detail

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kDecodeThreads)
    PagedDecodeAttentionKernel(const T* __restrict__ q, const T* __restrict__ k_pool,
                               const T* __restrict__ v_pool,
                               const int32_t* __restrict__ block_tables,
                               const int32_t* __restrict__ context_lens, T* __restrict__ out,
                               DecodeWorkspace workspace, PagedDecodeParams params,
                               int partition_size, int num_partitions) {
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 2 * kDecodeThreads);
  constexpr int kSlices = decode_detail::kDecodeSlices<kHeadDim>;
  static_assert(kSlices >= 1 && kHeadDim / 8 <= decode_detail::kDecodeLanesPerKey<kHeadDim>);
  // q (steps 1-2) and the P·V slices (step 4) share one buffer: q is dead once the scores are
  // in (two barriers separate them). At head_dim 256 this keeps static + dynamic shared memory
  // (8 + 32 KiB) under the 48 KiB a launch gets without opting in.
  TESSERA_SHARED(float, q_and_slices, kSlices * kDecodeMaxHeads * kHeadDim);
  float* const q_shared = q_and_slices;
  float* const slices = q_and_slices;
  TESSERA_SHARED(float, head_max, kDecodeMaxHeads);
  TESSERA_SHARED(float, head_sum, kDecodeMaxHeads);
  TESSERA_DYNAMIC_SHARED(float, scores);  // [heads][partition_size]

  const int group = params.num_heads / params.num_kv_heads;
  const int chunks = (group + kDecodeMaxHeads - 1) / kDecodeMaxHeads;
  const int kv_head = blockIdx.x / chunks;
  const int first_head = kv_head * group + (blockIdx.x % chunks) * kDecodeMaxHeads;
  const int heads_left = kv_head * group + group - first_head;
  const int heads = heads_left < kDecodeMaxHeads ? heads_left : kDecodeMaxHeads;
  const int seq = blockIdx.y;
  const int partition = blockIdx.z;
  const int context = __ldg(&context_lens[seq]);
  const int begin = partition * partition_size;
  const int remaining = context - begin;
  const int count = remaining < partition_size ? remaining : partition_size;
  const size_t q_row = (size_t(seq) * params.num_heads + first_head) * kHeadDim;
  const bool split = num_partitions > 1;

  if (count <= 0) {  // past this sequence's context: nothing, or zeros for a padding row
    if (!split && context == 0) {
      for (int i = threadIdx.x; i < heads * kHeadDim; i += blockDim.x) {
        out[q_row + i] = FromFloat<T>(0.0f);
      }
    }
    return;
  }
  for (int i = threadIdx.x; i < heads * kHeadDim; i += blockDim.x) {
    q_shared[i] = ToFloat(q[q_row + i]) * params.scale;
  }
  __syncthreads();
  const int32_t* table = block_tables + size_t(seq) * params.max_blocks_per_seq;
  decode_detail::Scores<kHeadDim>(q_shared, k_pool, table, begin, count, heads,
                                  params.block_size, params.num_kv_heads, kv_head,
                                  partition_size, scores);
  __syncthreads();
  decode_detail::Softmax(scores, partition_size, count, heads, head_max, head_sum);
  __syncthreads();
  decode_detail::WeightedValues<kHeadDim>(scores, partition_size, v_pool, table, begin, count,
                                          heads, params.block_size, params.num_kv_heads, kv_head,
                                          slices);
  __syncthreads();
  for (int i = threadIdx.x; i < heads * kHeadDim; i += blockDim.x) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    float o = 0.0f;
    for (int s = 0; s < kSlices; ++s) o += slices[(s * kDecodeMaxHeads + g) * kHeadDim + d];
    o /= head_sum[g];
    if (!split) {
      out[q_row + i] = FromFloat<T>(o);
    } else {
      const size_t part = (size_t(seq) * params.num_heads + first_head + g) * num_partitions +
                          partition;
      workspace.out[part * kHeadDim + d] = o;
      if (d == 0) {
        workspace.max[part] = head_max[g];
        workspace.sum[part] = head_sum[g];
      }
    }
  }
}

// One block per (head, sequence): merges the sequence's used partitions. A sequence that used
// one partition gets that partition's o / l unchanged (the bits the unsplit kernel writes), so
// with a fixed partition size a sequence's output does not depend on whether the launch split.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kDecodeCombineThreads)
    PagedDecodeCombineKernel(const int32_t* __restrict__ context_lens, DecodeWorkspace workspace,
                             T* __restrict__ out, int num_heads, int partition_size,
                             int num_partitions) {
  const int head = blockIdx.x;
  const int seq = blockIdx.y;
  const int context = __ldg(&context_lens[seq]);
  const int used = (context + partition_size - 1) / partition_size;
  const size_t row = size_t(seq) * num_heads + head;
  const size_t first = row * num_partitions;
  if (used <= 1) {  // zeros for a padding row; one partition: its o / l, as unsplit writes it
    for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
      const float o = used == 1 ? workspace.out[first * kHeadDim + d] : 0.0f;
      out[row * kHeadDim + d] = FromFloat<T>(o);
    }
    return;
  }
  float m = -INFINITY;
  for (int i = 0; i < used; ++i) m = fmaxf(m, workspace.max[first + i]);
  for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
    float total = 0.0f, o = 0.0f;
    for (int i = 0; i < used; ++i) {
      const float w = workspace.sum[first + i] * __expf(workspace.max[first + i] - m);
      total += w;
      o += w * workspace.out[(first + i) * kHeadDim + d];
    }
    out[row * kHeadDim + d] = FromFloat<T>(o / total);
  }
}

// Preconditions: shapes above; num_heads % num_kv_heads == 0; every context_lens[s] <=
// params.max_context_len and <= max_blocks_per_seq x block_size, with table entries for those
// positions in [0, num_blocks); pointers 16-byte aligned; when PagedDecodeWorkspaceFloats(params,
// kHeadDim) > 0, `workspace` holds that many floats (else it may be nullptr); out overlaps
// nothing. Two launches when split (attention, combine); returns the first failure.
template <class Launcher, typename T, int kHeadDim>
auto LaunchPagedDecodeAttention(Launcher& launcher, const PagedDecodeParams& params, const T* q,
                                const T* k_pool, const T* v_pool, const int32_t* block_tables,
                                const int32_t* context_lens, T* out, float* workspace) {
  const DecodePartitioning plan = PlanPagedDecode(params);
  DecodeWorkspace parts;
  if (plan.num_partitions > 1) {
    const size_t per_value = size_t(params.num_seqs) * params.num_heads * plan.num_partitions;
    parts = DecodeWorkspace{workspace, workspace + per_value, workspace + 2 * per_value};
  }
  const LaunchShape shape{
      dim3(params.num_kv_heads * DecodeHeadChunks(params), params.num_seqs, plan.num_partitions),
      dim3(kDecodeThreads), PagedDecodeSharedBytes(params)};
  auto status = launcher.Launch(shape, PagedDecodeAttentionKernel<T, kHeadDim>, q, k_pool,
                                v_pool, block_tables, context_lens, out, parts, params,
                                plan.partition_size, plan.num_partitions);
  if (plan.num_partitions == 1 || !LaunchSucceeded(status)) return status;
  const LaunchShape combine{dim3(params.num_heads, params.num_seqs),
                            dim3(kDecodeCombineThreads), 0};
  return launcher.Launch(combine, PagedDecodeCombineKernel<T, kHeadDim>, context_lens, parts, out,
                         params.num_heads, plan.partition_size, plan.num_partitions);
}

}  // namespace tessera::cuda
