// The sampler's split-row passes (sampling.cuh): each row's vocab is cut into chunks of
// kSamplingChunk ids, and one block per (chunk, row) does the passes that read the whole row, so
// a step's rows spread over every SM instead of one block per row reading 600 KB alone. They
// leave, per row, what the finishing kernel (one block per row) needs to touch only a few
// thousand ids instead of the vocab.
//
//   1. Stats (SamplingChunkStatsKernel): per chunk the raw max / sum-exp, the penalized arg-max
//      and the sum of tempered weights; merged in chunk order (MergeChunkStats) by every later
//      block that needs them, so each merge gives the same bits.
//   2. Sweep (SamplingSweepKernel, rows that sample with a filter or want logprobs): per chunk
//      and per level j of a ladder of thresholds at distance d_j = 2 + 2.6 j below the row's
//      best: how many ids have tempered log-weight a = (z - z_max) / T >= -d_j, the f32 weight of
//      those below, how many raw logits are >= raw_max - d_j, and the exact fixed-point mass of
//      the chunk (FixedMass of every weight, as top-p's radix select counts it).
//   3. Collect (SamplingCollectKernel): ChoosePlan picks, from the merged sweep, the smallest
//      candidate set that provably holds everything the row's sampling and logprobs can keep:
//        - top-k: >= k ids above the threshold (the set is a best-first prefix, so the k best
//          are in it);
//        - top-p alone: the weight below the threshold <= half of (1 - top_p) of the total, so
//          the best-first prefix reaching top_p of the mass ends above it (checked exactly
//          afterwards: the radix select over the candidates must reach its target, else the
//          row takes the full path);
//        - min-p: the threshold below min_p;
//        - top-N logprobs: >= N raw logits above the raw threshold;
//      and at most kSamplingCandidates ids in all. Each chunk writes its candidates (id,
//      penalized logit, raw logit) in id order at the offset its predecessors reserved (their
//      counts at the plan's levels); the finish closes the gaps (ids kept for both reasons are
//      counted twice), so the row's list is in id order.
//      A row without any filter needs no candidates: every id may be drawn, so the sweep also
//      keeps each chunk's f32 weight, and the finish draws within the one chunk where the target
//      falls. A row whose plan fails (flat logits, too many candidates) takes the full path: the
//      single-block passes over the whole vocab (as does a row without filters when the `probs`
//      output is asked for).
//
// Cost (design; H100, vocab 152k, 64 rows): three reads of the logits (39 MB, from L2 after the
// first) by 19 x 64 blocks, a few instructions per id each; the finish touches <= 4096
// candidates per row. Greedy rows without logprobs skip passes 2 and 3.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/block_select.cuh"
#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/sampling_row.cuh"
#include "kernels/cuda/sampling_types.h"

namespace tessera::cuda {

// Distance of threshold `level` below the row's best (tempered log-weight, or raw logit).
__device__ __forceinline__ float SamplingLevelDistance(int level) { return 2.0f + 2.6f * level; }

__device__ __forceinline__ bool SamplesGreedily(const SamplingRowParams& p) {
  return p.temperature < kSamplingGreedyTemperature;
}

// 1 / T for the tempered weights of a row that draws, 0 for a greedy one.
__device__ __forceinline__ float TemperedScale(const SamplingRowParams& p) {
  return SamplesGreedily(p) ? 0.0f : 1.0f / p.temperature;
}

// Whether the row draws a token (not greedy, and some logit is finite).
__device__ __forceinline__ bool DrawsStochastically(const SamplingRowParams& p,
                                                    const RowStats& stats) {
  return !SamplesGreedily(p) && stats.z_max != -INFINITY;
}

// The row's statistics from its chunks, merged in chunk order (every thread, the same bits).
struct MergedStats {
  RowStats stats;
  float total;  // sum of exp((z - z_max) / T) (stochastic rows; 0 otherwise)
};

__device__ __forceinline__ MergedStats MergeChunkStats(const SamplingChunkStats* chunks,
                                                       int num_chunks, float inv_t) {
  float raw_max = -INFINITY, raw_sum = 0.0f, best = -INFINITY, total = 0.0f;
  int best_id = INT_MAX;
  for (int c = 0; c < num_chunks; ++c) {
    const SamplingChunkStats chunk = chunks[c];
    MergeSoftmax(&raw_max, &raw_sum, chunk.raw_max, chunk.raw_sum);
    float tempered_max = best;
    if (inv_t > 0.0f) MergeSoftmax(&tempered_max, &total, chunk.best, chunk.tempered, inv_t);
    if (RanksBefore(chunk.best, chunk.best_id, best, best_id)) {
      best = chunk.best;
      best_id = chunk.best_id;
    }
  }
  const float lse = raw_max == -INFINITY ? raw_max : raw_max + logf(raw_sum);
  return MergedStats{RowStats{raw_max, lse, best, best_id}, total};
}

// Ids [begin, begin + size) of the row for chunk blockIdx.x.
struct ChunkRange {
  int begin, size;
};
__device__ __forceinline__ ChunkRange ThisChunk(int vocab) {
  const int begin = static_cast<int>(blockIdx.x) * kSamplingChunk;
  const int left = vocab - begin;
  return ChunkRange{begin, left < kSamplingChunk ? left : kSamplingChunk};
}

// Pass 1. Grid (chunks, rows), kSelectThreads threads.
template <typename Logit>
__global__ void __launch_bounds__(kSelectThreads)
    SamplingChunkStatsKernel(const Logit* __restrict__ logits, int vocab,
                             const SamplingRowParams* __restrict__ params,
                             SamplingPenalties penalties, SamplingWorkspaceView work) {
  TESSERA_SHARED(uint32_t, bits, kSamplingChunk / 32);
  TESSERA_SHARED(SamplingShared, shared, 1);
  const int row = blockIdx.y;
  const SamplingRowParams p = params[row];
  if (!p.active) return;
  const ChunkRange chunk = ThisChunk(vocab);
  const float* x = logits + static_cast<size_t>(row) * vocab;
  const RowLogits r = MakeRowLogits(x, vocab, row, p, penalties, bits, chunk.begin, chunk.size);
  const float inv_t = TemperedScale(p);
  StatsAccumulator acc;
  ForEachRowElement(x + chunk.begin, chunk.size, [&](int i, float value) {
    if (i >= 0) acc.Add(r, chunk.begin + i, value, inv_t);
  });
  float max = acc.max, sum = acc.sum, best = acc.best, tempered = acc.tempered;
  float tempered_best = acc.best;
  for (int offset = 16; offset > 0; offset >>= 1) {
    MergeSoftmax(&max, &sum, __shfl_xor_sync(kFullMask, max, offset),
                 __shfl_xor_sync(kFullMask, sum, offset));
    const float other_best = __shfl_xor_sync(kFullMask, tempered_best, offset);
    const float other_tempered = __shfl_xor_sync(kFullMask, tempered, offset);
    if (inv_t > 0.0f) MergeSoftmax(&tempered_best, &tempered, other_best, other_tempered, inv_t);
  }
  SamplingShared& s = shared[0];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
    s.stat_max[warp] = max;
    s.stat_sum[warp] = sum;
    s.warp_mass[warp] = tempered;  // (reused) the warp's tempered sum, relative to its best
    s.top_values[warp] = tempered_best;
  }
  int best_id = acc.best_id;
  BlockArgMax(&best, &best_id, s.arg_value, s.arg_index);  // its barrier publishes the rest
  if (threadIdx.x != 0) return;
  max = s.stat_max[0];
  sum = s.stat_sum[0];
  tempered = s.warp_mass[0];
  tempered_best = s.top_values[0];
  for (int w = 1; w < kSamplingWarps; ++w) {
    MergeSoftmax(&max, &sum, s.stat_max[w], s.stat_sum[w]);
    if (inv_t > 0.0f) {
      MergeSoftmax(&tempered_best, &tempered, s.top_values[w], s.warp_mass[w], inv_t);
    }
  }
  work.stats[static_cast<size_t>(row) * gridDim.x + blockIdx.x] =
      SamplingChunkStats{max, sum, best, best_id, tempered};
}

// What the row needs beyond its statistics (block-uniform).
__device__ __forceinline__ bool NeedsSweep(const SamplingRowParams& p, const RowStats& stats) {
  return DrawsStochastically(p, stats) || p.num_logprobs > 0;
}

// Pass 2. Grid (chunks, rows), kSelectThreads threads.
template <typename Logit>
__global__ void __launch_bounds__(kSelectThreads)
    SamplingSweepKernel(const Logit* __restrict__ logits, int vocab,
                        const SamplingRowParams* __restrict__ params, SamplingPenalties penalties,
                        SamplingWorkspaceView work) {
  TESSERA_SHARED(uint32_t, bits, kSamplingChunk / 32);
  TESSERA_SHARED(SamplingChunkSweep, warp_sweeps, kSamplingWarps);
  const int row = blockIdx.y;
  const SamplingRowParams p = params[row];
  if (!p.active) return;
  const float inv_t = TemperedScale(p);
  const MergedStats merged =
      MergeChunkStats(work.stats + static_cast<size_t>(row) * gridDim.x, gridDim.x, inv_t);
  if (!NeedsSweep(p, merged.stats)) return;
  const bool stochastic = DrawsStochastically(p, merged.stats);
  const ChunkRange chunk = ThisChunk(vocab);
  const float* x = logits + static_cast<size_t>(row) * vocab;
  const RowLogits r = MakeRowLogits(x, vocab, row, p, penalties, bits, chunk.begin, chunk.size);
  SamplingChunkSweep mine{};
  ForEachRowElement(x + chunk.begin, chunk.size, [&](int i, float value) {
    if (i < 0) return;
    if (p.num_logprobs > 0) {
      TESSERA_UNROLL for (int j = 0; j < kSamplingLevels; ++j) {
        mine.raw_count[j] += value >= merged.stats.raw_max - SamplingLevelDistance(j) ? 1u : 0u;
      }
    }
    if (!stochastic) return;
    const float z = r.Penalized(chunk.begin + i, value);
    const float a = (z - merged.stats.z_max) * inv_t;
    const float weight = expf(a);
    mine.mass += FixedMass(weight);
    mine.kept += weight;
    TESSERA_UNROLL for (int j = 0; j < kSamplingLevels; ++j) {
      if (a >= -SamplingLevelDistance(j)) {
        ++mine.count[j];
      } else {
        mine.below[j] += weight;
      }
    }
  });
  TESSERA_UNROLL for (int j = 0; j < kSamplingLevels; ++j) {
    mine.count[j] = WarpSum(mine.count[j]);
    mine.raw_count[j] = WarpSum(mine.raw_count[j]);
    mine.below[j] = WarpSum(mine.below[j]);
  }
  mine.kept = WarpSum(mine.kept);
  mine.mass = WarpSum(mine.mass);
  if (threadIdx.x % 32 == 0) warp_sweeps[threadIdx.x / 32] = mine;
  __syncthreads();
  if (threadIdx.x != 0) return;
  SamplingChunkSweep total = warp_sweeps[0];
  for (int w = 1; w < kSamplingWarps; ++w) {
    for (int j = 0; j < kSamplingLevels; ++j) {
      total.count[j] += warp_sweeps[w].count[j];
      total.raw_count[j] += warp_sweeps[w].raw_count[j];
      total.below[j] += warp_sweeps[w].below[j];
    }
    total.mass += warp_sweeps[w].mass;
    total.kept += warp_sweeps[w].kept;
  }
  work.sweep[static_cast<size_t>(row) * gridDim.x + blockIdx.x] = total;
}

// Which candidates the row keeps (levels -1: none of that kind); full: the row takes the full
// path. The same in every block and thread that computes it.
struct CandidatePlan {
  int level = -1;      // penalized: a >= -d_level
  int raw_level = -1;  // raw: x >= raw_max - d_raw_level
  bool full = false;
  bool chunk_draw = false;   // no filter: the draw walks the one chunk its target falls in
  bool min_p_holds = false;  // every id min-p keeps is a candidate
  unsigned long long vocab_mass = 0;  // exact fixed-point mass of the whole row
};

__device__ __forceinline__ CandidatePlan ChoosePlan(const SamplingRowParams& p,
                                                    const MergedStats& merged,
                                                    const SamplingChunkSweep* sweeps,
                                                    int num_chunks, int vocab) {
  CandidatePlan plan;
  const bool stochastic = DrawsStochastically(p, merged.stats);
  const bool top_k = p.top_k > 0 && p.top_k < vocab;
  const bool top_p = p.top_p < 1.0f;
  const bool min_p = p.min_p > 0.0f;
  unsigned pen_count = 0, raw_count = 0;
  if (stochastic) {
    plan.chunk_draw = !top_k && !top_p && !min_p;  // every id may be drawn
    for (int j = 0; j < kSamplingLevels && plan.level < 0 && !plan.chunk_draw; ++j) {
      unsigned count = 0;
      float below = 0.0f;
      for (int c = 0; c < num_chunks; ++c) {
        count += sweeps[c].count[j];
        below += sweeps[c].below[j];
      }
      // With top-k and top-p, top-p's target is a fraction of the top-k set's mass: the set
      // must be among the candidates even when min-p bounds what is kept.
      const bool above_min_p = min_p && p.min_p >= 1.01f * expf(-SamplingLevelDistance(j));
      const bool holds_min_p = above_min_p && !(top_k && top_p);
      const bool holds_top_k = top_k && count >= static_cast<unsigned>(p.top_k);
      const bool holds_top_p = !top_k && top_p && below <= 0.5f * (1.0f - p.top_p) * merged.total;
      if ((holds_min_p || holds_top_k || holds_top_p) && count <= kSamplingCandidates) {
        plan.level = j;
        plan.min_p_holds = above_min_p;
        pen_count = count;
      }
    }
    if (plan.level < 0 && !plan.chunk_draw) {
      plan.full = true;
      return plan;
    }
    for (int c = 0; c < num_chunks; ++c) plan.vocab_mass += sweeps[c].mass;
  }
  const int wanted = p.num_logprobs < vocab ? p.num_logprobs : vocab;
  if (wanted > 0) {
    for (int j = 0; j < kSamplingLevels && plan.raw_level < 0; ++j) {
      unsigned count = 0;
      for (int c = 0; c < num_chunks; ++c) count += sweeps[c].raw_count[j];
      if (count >= static_cast<unsigned>(wanted)) {
        plan.raw_level = j;
        raw_count = count;
      }
    }
    if (plan.raw_level < 0 || pen_count + raw_count > kSamplingCandidates) plan.full = true;
  }
  return plan;
}

// Whether id i (raw logit x, penalized z) is a candidate of the plan.
__device__ __forceinline__ bool IsCandidate(const CandidatePlan& plan, const MergedStats& merged,
                                            float inv_t, float x, float z) {
  if (plan.raw_level >= 0 && x >= merged.stats.raw_max - SamplingLevelDistance(plan.raw_level)) {
    return true;
  }
  return plan.level >= 0 &&
         (z - merged.stats.z_max) * inv_t >= -SamplingLevelDistance(plan.level);
}

// Pass 3. Grid (chunks, rows), kSelectThreads threads: the chunk's candidates in id order at
// its offset (the counts of the chunks before it at the plan's levels).
template <typename Logit>
__global__ void __launch_bounds__(kSelectThreads)
    SamplingCollectKernel(const Logit* __restrict__ logits, int vocab,
                          const SamplingRowParams* __restrict__ params,
                          SamplingPenalties penalties, SamplingWorkspaceView work) {
  TESSERA_SHARED(uint32_t, bits, kSamplingChunk / 32);
  TESSERA_SHARED(unsigned, warp_totals, kSelectWarps);
  TESSERA_SHARED(unsigned, tile_count, 1);
  const int row = blockIdx.y;
  const SamplingRowParams p = params[row];
  if (!p.active) return;
  const float inv_t = TemperedScale(p);
  const size_t first = static_cast<size_t>(row) * gridDim.x;
  const MergedStats merged = MergeChunkStats(work.stats + first, gridDim.x, inv_t);
  if (!NeedsSweep(p, merged.stats)) return;
  const CandidatePlan plan = ChoosePlan(p, merged, work.sweep + first, gridDim.x, vocab);
  if (plan.full || (plan.level < 0 && plan.raw_level < 0)) return;
  unsigned offset = 0;  // the room the chunks before this one reserved
  for (int c = 0; c < static_cast<int>(blockIdx.x); ++c) {
    if (plan.level >= 0) offset += work.sweep[first + c].count[plan.level];
    if (plan.raw_level >= 0) offset += work.sweep[first + c].raw_count[plan.raw_level];
  }
  const ChunkRange chunk = ThisChunk(vocab);
  const float* x = logits + static_cast<size_t>(row) * vocab;
  const RowLogits r = MakeRowLogits(x, vocab, row, p, penalties, bits, chunk.begin, chunk.size);
  const size_t out = static_cast<size_t>(row) * kSamplingCandidates;
  unsigned written = 0;  // the same in every thread
  for (int base = 0; base < chunk.size; base += kSelectThreads) {
    const int i = base + static_cast<int>(threadIdx.x);
    float value = 0.0f, z = 0.0f;
    bool keep = false;
    if (i < chunk.size) {
      value = x[chunk.begin + i];
      z = r.Penalized(chunk.begin + i, value);
      keep = IsCandidate(plan, merged, inv_t, value, z);
    }
    const unsigned position = BlockInclusiveScan(keep ? 1u : 0u, warp_totals);
    if (keep) {
      const size_t at = out + offset + written + position - 1;
      work.ids[at] = chunk.begin + i;
      work.penalized[at] = z;
      work.raw[at] = value;
    }
    // The tile's count: the last thread's inclusive position (read before the next scan's
    // first barrier, after which it is overwritten).
    if (threadIdx.x == kSelectThreads - 1) *tile_count = position;
    __syncthreads();
    written += *tile_count;
  }
  if (threadIdx.x == 0) work.chunk_counts[first + blockIdx.x] = static_cast<int32_t>(written);
}

}  // namespace tessera::cuda
