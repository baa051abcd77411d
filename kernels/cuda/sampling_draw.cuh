// The sampler's draw (sampling.cuh): kept mass per warp range, the range holding u, the walk to
// the token, the optional probabilities output, and the raw top-N logprobs.
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/cuda/block_select.cuh"
#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/philox.cuh"
#include "kernels/cuda/sampling_row.cuh"
#include "kernels/cuda/sampling_types.h"

namespace tessera::cuda {

__device__ __forceinline__ int IntMin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int IntMax(int a, int b) { return a > b ? a : b; }

__device__ __forceinline__ int WarpSumInt(int value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

struct DrawContext {
  RowLogits row;
  float z_max;
  float inv_t;
  float min_p;
  Cutoff cut;
  __device__ __forceinline__ float Weight(float z) const { return expf((z - z_max) * inv_t); }
  __device__ __forceinline__ bool PassesMinP(float weight) const {
    return !(min_p > 0.0f && weight < min_p);
  }
};

// Logits each lane loads ahead of use in the draw's range totals (latency: one block per row).
inline constexpr int kDrawLoadsInFlight = 4;

// Warp w's part of [begin, end) split 8 ways in multiples of 32 ids (the last parts shorter).
__device__ __forceinline__ void SubRange(int begin, int end, int* sub_begin, int* sub_end) {
  const int per_warp = (end - begin + kSamplingThreads - 1) / kSamplingThreads * 32;
  *sub_begin = IntMin(end, begin + static_cast<int>(threadIdx.x / 32) * per_warp);
  *sub_end = IntMin(end, *sub_begin + per_warp);
}

// Warp-collective, one step of 32 ids from `base`: the kept weight of id base + lane (0 when it
// is dropped or past `end`). *ties_seen counts tokens with the cutoff key in earlier ids.
__device__ __forceinline__ float StepKeptWeight(const DrawContext& c, int base, int end,
                                                int* ties_seen) {
  const int lane = threadIdx.x % 32;
  const int i = base + lane;
  const bool in = i < end;
  const float z = in ? c.row.Penalized(i) : 0.0f;
  const uint32_t key = DescendingKey(z);
  const bool tie = in && key == c.cut.key;
  const unsigned ties = __ballot_sync(kFullMask, tie);
  const int rank = *ties_seen + __popc(ties & ((1u << lane) - 1u));
  *ties_seen += __popc(ties);
  if (!in || key > c.cut.key || (tie && rank >= c.cut.ties)) return 0.0f;
  const float weight = c.Weight(z);
  return c.PassesMinP(weight) ? weight : 0.0f;
}

// Per warp sub-range of [begin, end): the kept mass below the cutoff key and the cutoff ties.
__device__ __forceinline__ void SubRangeTotals(const DrawContext& c, int begin, int end,
                                               SamplingShared& s) {
  int sub_begin, sub_end;
  SubRange(begin, end, &sub_begin, &sub_end);
  float strict = 0.0f;
  int ties = 0;
  // kDrawLoadsInFlight loads issued before any is used; each lane still adds its ids in
  // ascending order (the sum's rounding does not depend on the loads in flight).
  for (int first = sub_begin + static_cast<int>(threadIdx.x % 32); first < sub_end;
       first += 32 * kDrawLoadsInFlight) {
    float raw[kDrawLoadsInFlight];
    TESSERA_UNROLL for (int u = 0; u < kDrawLoadsInFlight; ++u) {
      const int i = first + 32 * u;
      raw[u] = i < sub_end ? __ldg(&c.row.x[i]) : 0.0f;
    }
    TESSERA_UNROLL for (int u = 0; u < kDrawLoadsInFlight; ++u) {
      const int i = first + 32 * u;
      if (i >= sub_end) break;
      const float z = c.row.Penalized(i, raw[u]);
      const uint32_t key = DescendingKey(z);
      if (key == c.cut.key) {
        ++ties;
      } else if (key < c.cut.key) {
        const float weight = c.Weight(z);
        if (c.PassesMinP(weight)) strict += weight;
      }
    }
  }
  strict = WarpSum(strict);
  ties = WarpSumInt(ties);
  if (threadIdx.x % 32 == 0) {
    s.warp_mass[threadIdx.x / 32] = strict;
    s.warp_ties[threadIdx.x / 32] = ties;
  }
}

// Kept mass of sub-range w: its mass below the cutoff key plus its cutoff ties that are kept
// (the first c.cut.ties in id order overall; ties_before precede the sub-range).
__device__ __forceinline__ float SubRangeKept(const DrawContext& c, const SamplingShared& s, int w,
                                              int ties_before, float tie_weight) {
  const int kept = IntMax(0, IntMin(c.cut.ties - ties_before, s.warp_ties[w]));
  return s.warp_mass[w] + (kept > 0 ? static_cast<float>(kept) * tie_weight : 0.0f);
}

// Thread 0, after SubRangeTotals: on the first level the total and target = u * total; then
// narrows the range to the sub-range where the running kept mass first exceeds the target
// (else the last sub-range with mass).
__device__ __forceinline__ void NarrowDrawRange(const DrawContext& c, float u, bool first_level,
                                                float target, SamplingShared& s) {
  float tie_weight = 0.0f;
  if (c.cut.key != 0xFFFFFFFFu) tie_weight = c.Weight(KeyValue(c.cut.key));
  if (!c.PassesMinP(tie_weight)) tie_weight = 0.0f;
  if (first_level) {
    float total = 0.0f;
    for (int w = 0, ties = 0; w < kSamplingWarps; ties += s.warp_ties[w], ++w) {
      s.first_ties_before[w] = ties;
      total += SubRangeKept(c, s, w, ties, tie_weight);
    }
    s.total = total;
    s.target = target >= 0.0f ? target : u * total;
  }
  float cum = s.range_cum, cross_cum = 0.0f, last_cum = 0.0f;
  int ties = s.range_ties_before, cross_ties = 0, last_ties = 0;
  int cross = -1, last = 0;
  for (int w = 0; w < kSamplingWarps; ++w) {
    const float mass = SubRangeKept(c, s, w, ties, tie_weight);
    if (mass > 0.0f) {
      if (cross < 0 && s.target < cum + mass) {
        cross = w;
        cross_cum = cum;
        cross_ties = ties;
      }
      last = w;
      last_cum = cum;
      last_ties = ties;
    }
    cum += mass;
    ties += s.warp_ties[w];
  }
  if (cross < 0) {
    cross = last;
    cross_cum = last_cum;
    cross_ties = last_ties;
  }
  const int begin = s.range_begin, end = s.range_end;
  const int per_warp = (end - begin + kSamplingThreads - 1) / kSamplingThreads * 32;
  s.range_begin = IntMin(end, begin + cross * per_warp);
  s.range_end = IntMin(end, s.range_begin + per_warp);
  s.range_cum = cross_cum;
  s.range_ties_before = cross_ties;
}

// Warp 0 walks the final range: the first kept id where the running mass exceeds the target
// (rounding fallback: the range's last kept id; -1 if none). Lane-uniform result.
__device__ __forceinline__ int WalkToToken(const DrawContext& c, const SamplingShared& s) {
  const int end = s.range_end;
  float cum = s.range_cum;
  int ties_seen = s.range_ties_before;
  int last_kept = -1;
  const float target = s.target;
  for (int base = s.range_begin; base < end; base += 32) {
    const float weight = StepKeptWeight(c, base, end, &ties_seen);
    const float inclusive = WarpInclusiveScan(weight);
    const unsigned crossed = __ballot_sync(kFullMask, weight > 0.0f && target < cum + inclusive);
    const unsigned kept = __ballot_sync(kFullMask, weight > 0.0f);
    if (kept != 0u) last_kept = base + 31 - __clz(kept);
    if (crossed != 0u) return base + __ffs(crossed) - 1;
    cum += __shfl_sync(kFullMask, inclusive, 31);
  }
  return last_kept;
}

// probs[id] = kept weight / total for every element of this warp's first-level sub-range: id
// = the element's index, or ids[index] for a candidate list (the caller zeroed the other ids).
__device__ __forceinline__ void WriteProbs(const DrawContext& c, const SamplingShared& s,
                                           const int32_t* ids, float* probs) {
  int begin, end;
  SubRange(0, c.row.vocab, &begin, &end);
  int ties_seen = s.first_ties_before[threadIdx.x / 32];
  const float total = s.total;
  for (int base = begin; base < end; base += 32) {
    const float weight = StepKeptWeight(c, base, end, &ties_seen);
    const int i = base + static_cast<int>(threadIdx.x % 32);
    if (i < end) probs[ids != nullptr ? ids[i] : i] = weight / total;
  }
}

// The draw: narrows [begin, end) (default: [0, vocab)) 8 ways per level (each level reads only
// the current range: V, V/8, V/64, ...) until at most 256 ids are left, which warp 0 walks.
// The running kept mass must exceed u * (the range's kept mass), or `target` when >= 0.
// Returns the token.
__device__ __forceinline__ int Draw(const DrawContext& c, float u, int fallback,
                                    SamplingShared& s, int begin = 0, int end = -1,
                                    float target = -1.0f) {
  if (threadIdx.x == 0) {
    s.range_begin = begin;
    s.range_end = end >= 0 ? end : c.row.vocab;
    s.range_cum = 0.0f;
    s.range_ties_before = 0;
  }
  for (bool first_level = true;; first_level = false) {
    __syncthreads();
    const int begin = s.range_begin, end = s.range_end;
    if (!first_level && end - begin <= kSamplingThreads) break;
    SubRangeTotals(c, begin, end, s);
    __syncthreads();
    if (threadIdx.x == 0) NarrowDrawRange(c, u, first_level, target, s);
  }
  int token = -1;
  if (threadIdx.x < 32) token = WalkToToken(c, s);
  if (threadIdx.x == 0) s.chosen = token >= 0 ? token : fallback;
  __syncthreads();
  return s.chosen;
}

// The draw over `row`'s elements (the vocab, or a candidate list in id order: ids maps an
// element to its id) under `cut`, and the optional `probs` row ([vocab]); returns the token
// (block-uniform; `fallback` when rounding leaves nothing kept).
__device__ __forceinline__ int DrawKept(const RowLogits& row, const SamplingRowParams& p,
                                        float z_max, const Cutoff& cut, const int32_t* ids,
                                        int vocab, int fallback, SamplingShared& s,
                                        float* probs) {
  const DrawContext c{row, z_max, 1.0f / p.temperature, p.min_p, cut};
  const int chosen = Draw(c, SamplingUniform(p.seed, p.position), -1, s);
  if (probs != nullptr) {
    if (ids != nullptr) {
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) probs[i] = 0.0f;
      __syncthreads();
    }
    WriteProbs(c, s, ids, probs);
  }
  __syncthreads();
  if (chosen < 0) return fallback;
  return ids != nullptr ? ids[chosen] : chosen;
}

// Appends, in id order, the `wanted` lowest ids whose raw key is `key` (when there are more).
__device__ __forceinline__ void CollectLowestTies(const float* x, int vocab, uint32_t key,
                                                  int wanted, SamplingShared& s) {
  int last = -1;
  for (int t = 0; t < wanted; ++t) {
    if (threadIdx.x == 0) s.min_id = INT_MAX;
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      if (i > last && DescendingKey(x[i]) == key) {
        atomicMin(&s.min_id, i);
        break;  // a thread's ids ascend: its first match is its smallest
      }
    }
    __syncthreads();
    last = s.min_id;
    if (threadIdx.x == 0) {
      s.top_ids[s.top_count] = last;
      s.top_values[s.top_count] = x[last];
      ++s.top_count;
    }
    __syncthreads();
  }
}

// The n best raw logits (ties: lower id), best first, as logprobs; entries past n: -1 / -inf.
// x: the row ([vocab]) or a candidate list in id order whose element i is id map[i].
__device__ __forceinline__ void TopLogprobs(const float* x, int vocab, int n, float lse,
                                            SamplingShared& s, const int32_t* map, int32_t* ids,
                                            float* logprobs) {
  n = IntMin(IntMin(n, kSamplingMaxLogprobs), vocab);
  if (threadIdx.x == 0) s.top_count = 0;
  if (n > 0) {
    const SelectResult r = RadixSelect<false>(
        RawKeys{x}, vocab, {static_cast<unsigned long long>(n), -1.0, false}, s.select);
    const int wanted = n - static_cast<int>(r.count_before);
    const bool all_ties = static_cast<int>(r.count_at) == wanted;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      const uint32_t key = DescendingKey(x[i]);
      if (key < r.key || (all_ties && key == r.key)) {
        const int slot = atomicAdd(&s.top_count, 1);
        s.top_ids[slot] = i;
        s.top_values[slot] = x[i];
      }
    }
    __syncthreads();
    if (!all_ties) CollectLowestTies(x, vocab, r.key, wanted, s);
  }
  if (threadIdx.x != 0 || ids == nullptr) return;
  for (int a = 1; a < s.top_count; ++a) {  // insertion sort, best first
    const int id = s.top_ids[a];
    const float value = s.top_values[a];
    int b = a;
    for (; b > 0 && RanksBefore(value, id, s.top_values[b - 1], s.top_ids[b - 1]); --b) {
      s.top_ids[b] = s.top_ids[b - 1];
      s.top_values[b] = s.top_values[b - 1];
    }
    s.top_ids[b] = id;
    s.top_values[b] = value;
  }
  for (int r = 0; r < kSamplingMaxLogprobs; ++r) {
    ids[r] = r < s.top_count ? (map != nullptr ? map[s.top_ids[r]] : s.top_ids[r]) : -1;
    logprobs[r] = r < s.top_count ? s.top_values[r] - lse : -INFINITY;
  }
}

}  // namespace tessera::cuda
