// The sampler's per-row pieces (sampling.cuh): the row's logits with penalties applied on the
// fly, the statistics pass, and the top-k / top-p cutoff by radix select.
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/cuda/block_select.cuh"
#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/sampling_types.h"

namespace tessera::cuda {

inline constexpr int kSamplingThreads = kSelectThreads;
inline constexpr int kSamplingWarps = kSelectWarps;

struct SamplingShared {
  SelectShared select;
  float stat_max[kSamplingWarps];
  float stat_sum[kSamplingWarps];
  float arg_value[kSamplingWarps];
  int arg_index[kSamplingWarps];
  // The draw narrows an id range [range_begin, range_end) 8 ways per level (sampling_draw.cuh).
  float warp_mass[kSamplingWarps];  // per sub-range: kept mass below the cutoff key, then all kept
  int warp_ties[kSamplingWarps];    // per sub-range: tokens with the cutoff key
  int first_ties_before[kSamplingWarps];  // first level (whole vocab): cutoff ties before each
  int range_begin;
  int range_end;
  float range_cum;        // kept mass before the range
  int range_ties_before;  // cutoff-key tokens before the range
  float total;
  float target;
  int chosen;
  int top_count;
  int min_id;
  int top_ids[kSamplingMaxLogprobs];
  float top_values[kSamplingMaxLogprobs];
};

// The penalty arithmetic (f32, as the CPU sampler).
__host__ __device__ __forceinline__ float ApplyPenalties(float z, int count, bool in_prompt,
                                                         float repetition, float presence,
                                                         float frequency) {
  if (repetition != 1.0f && (in_prompt || count > 0))
    z = z > 0.0f ? z / repetition : z * repetition;
  if (count > 0) z -= frequency * static_cast<float>(count) + presence;
  return z;
}

// One row's logits, raw and penalized.
struct RowLogits {
  const float* x;
  int vocab;
  const uint32_t* bits;  // [ceil(vocab / 32)] penalized ids (shared), or null: no penalties
  const int32_t* tokens;
  const int32_t* counts;
  const uint8_t* in_prompt;
  int num_entries;
  float repetition, presence, frequency;

  __device__ __forceinline__ float Penalized(int i) const { return Penalized(i, x[i]); }
  // The same for id i whose raw logit z the caller already loaded.
  __device__ __forceinline__ float Penalized(int i, float z) const {
    if (bits == nullptr || ((bits[i >> 5] >> (i & 31)) & 1u) == 0) return z;
    int lo = 0;
    int hi = num_entries - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (tokens[mid] < i)
        lo = mid + 1;
      else
        hi = mid;
    }
    return ApplyPenalties(z, counts[lo], in_prompt[lo] != 0, repetition, presence, frequency);
  }
};

// Rank keys of the raw logits (top-N logprobs).
struct RawKeys {
  const float* x;
  __device__ __forceinline__ const float* data() const { return x; }
  __device__ __forceinline__ uint32_t Key(int, float z) const { return DescendingKey(z); }
  __device__ __forceinline__ unsigned long long Mass(uint32_t) const { return 0; }
};

// Rank keys and fixed-point weights of the penalized logits (top-k, top-p).
struct WeightedKeys {
  RowLogits row;
  float z_max;
  float inv_t;
  __device__ __forceinline__ const float* data() const { return row.x; }
  __device__ __forceinline__ uint32_t Key(int i, float z) const {
    return DescendingKey(row.Penalized(i, z));
  }
  // KeyValue(key) is the penalized logit (+0 for -0, the same weight).
  __device__ __forceinline__ unsigned long long Mass(uint32_t key) const {
    return FixedMass(expf((KeyValue(key) - z_max) * inv_t));
  }
};

// Builds the row's penalty bitmap when it has penalties (block-uniform decision).
__device__ __forceinline__ RowLogits MakeRowLogits(const float* x, int vocab, int row,
                                                   const SamplingRowParams& p,
                                                   const SamplingPenalties& penalties,
                                                   uint32_t* bits) {
  RowLogits r{x,
              vocab,
              nullptr,
              nullptr,
              nullptr,
              nullptr,
              0,
              p.repetition_penalty,
              p.presence_penalty,
              p.frequency_penalty};
  if (penalties.offsets == nullptr) return r;
  const int begin = penalties.offsets[row];
  const int end = penalties.offsets[row + 1];
  const bool any =
      p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (end <= begin || !any) return r;
  const int words = (vocab + 31) / 32;
  for (int w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0u;
  __syncthreads();
  // Ids are distinct, so adding distinct bits is an OR.
  for (int e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const int token = penalties.tokens[e];
    atomicAdd(&bits[token >> 5], 1u << (token & 31));
  }
  __syncthreads();
  r.bits = bits;
  r.tokens = penalties.tokens + begin;
  r.counts = penalties.generated_counts + begin;
  r.in_prompt = penalties.in_prompt + begin;
  r.num_entries = end - begin;
  return r;
}

struct RowStats {
  float raw_max;  // max of the raw logits
  float raw_lse;  // log-sum-exp of the raw logits
  float z_max;    // max of the penalized logits
  int argmax;     // its lowest id
};

// Merges (max, sum of exp(x - max)) pairs; -inf maxima contribute nothing.
__device__ __forceinline__ void MergeSoftmax(float* max, float* sum, float other_max,
                                             float other_sum) {
  const float merged = fmaxf(*max, other_max);
  const float mine = *max == -INFINITY ? 0.0f : *sum * expf(*max - merged);
  const float theirs = other_max == -INFINITY ? 0.0f : other_sum * expf(other_max - merged);
  *max = merged;
  *sum = mine + theirs;
}

// One thread's share of the stats pass: online raw max / sum-exp and the penalized arg-max.
struct StatsAccumulator {
  float max = -INFINITY, sum = 0.0f, best = -INFINITY;
  int best_id = INT_MAX;

  __device__ __forceinline__ void Add(const RowLogits& row, int i, float x) {
    if (x > max) {
      sum = sum * expf(max - x) + 1.0f;
      max = x;
    } else if (x != -INFINITY) {
      sum += expf(x - max);
    }
    const float z = row.Penalized(i, x);
    if (RanksBefore(z, i, best, best_id)) {
      best = z;
      best_id = i;
    }
  }
};

// float4 loads each thread keeps in flight in the stats pass: one block reads a whole row, so
// its bandwidth is what its loads in flight allow (Little's law), not the chip's.
inline constexpr int kStatsLoadsInFlight = 4;

// One pass: online raw max / sum-exp and the penalized arg-max. A row that starts 16-byte
// aligned is read as float4s, kStatsLoadsInFlight per thread issued before any is used; the
// tail (and an unaligned row) element by element.
__device__ __forceinline__ RowStats ComputeRowStats(const RowLogits& row, SamplingShared& s) {
  StatsAccumulator acc;
  int tail = 0;
  if (reinterpret_cast<uintptr_t>(row.x) % sizeof(float4) == 0) {
    const float4* x4 = reinterpret_cast<const float4*>(row.x);
    const int vectors = row.vocab / 4;
    const int stride = int(blockDim.x);
    for (int first = threadIdx.x; first < vectors; first += stride * kStatsLoadsInFlight) {
      float4 loaded[kStatsLoadsInFlight];
      TESSERA_UNROLL for (int u = 0; u < kStatsLoadsInFlight; ++u) {
        const int v = first + u * stride;
        if (v < vectors) loaded[u] = __ldg(&x4[v]);
      }
      TESSERA_UNROLL for (int u = 0; u < kStatsLoadsInFlight; ++u) {
        const int v = first + u * stride;
        if (v >= vectors) break;
        acc.Add(row, 4 * v, loaded[u].x);
        acc.Add(row, 4 * v + 1, loaded[u].y);
        acc.Add(row, 4 * v + 2, loaded[u].z);
        acc.Add(row, 4 * v + 3, loaded[u].w);
      }
    }
    tail = vectors * 4;
  }
  for (int i = tail + threadIdx.x; i < row.vocab; i += blockDim.x) acc.Add(row, i, row.x[i]);
  float max = acc.max, sum = acc.sum, best = acc.best;
  int best_id = acc.best_id;
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_max = __shfl_xor_sync(kFullMask, max, offset);
    const float other_sum = __shfl_xor_sync(kFullMask, sum, offset);
    MergeSoftmax(&max, &sum, other_max, other_sum);
  }
  if (threadIdx.x % 32 == 0) {
    s.stat_max[threadIdx.x / 32] = max;
    s.stat_sum[threadIdx.x / 32] = sum;
  }
  BlockArgMax(&best, &best_id, s.arg_value, s.arg_index);  // its barrier publishes stat_*
  max = s.stat_max[0];
  sum = s.stat_sum[0];
  for (int w = 1; w < kSamplingWarps; ++w) MergeSoftmax(&max, &sum, s.stat_max[w], s.stat_sum[w]);
  const float lse = max == -INFINITY ? max : max + logf(sum);
  return RowStats{max, lse, best, best_id};
}

// The kept set: tokens with key < key, the first `ties` (in id order) with key == key, and
// (min_p > 0) only those with weight >= min_p.
struct Cutoff {
  uint32_t key;
  int ties;
};

// Top-k then top-p cutoffs by radix select (see the header comment).
__device__ __forceinline__ Cutoff FindCutoff(const RowLogits& row, const SamplingRowParams& p,
                                             float z_max, float inv_t, SamplingShared& s) {
  Cutoff cut{0xFFFFFFFFu, INT_MAX};
  const WeightedKeys keys{row, z_max, inv_t};
  const bool top_k = p.top_k > 0 && p.top_k < row.vocab;
  const bool top_p = p.top_p < 1.0f;
  SelectTarget p_target{0, static_cast<double>(p.top_p),
                        true};  // fraction of the whole vocab's mass
  if (top_k) {
    const unsigned long long k = static_cast<unsigned long long>(p.top_k);
    const SelectResult r = top_p ? RadixSelect<true>(keys, row.vocab, {k, -1.0, false}, s.select)
                                 : RadixSelect<false>(keys, row.vocab, {k, -1.0, false}, s.select);
    cut = Cutoff{r.key, static_cast<int>(k - r.count_before)};
    // Mass of the top-k set: ties share one weight, so mass_at / count_at is exact.
    const unsigned long long kept = r.mass_before + (k - r.count_before) * (r.mass_at / r.count_at);
    p_target = SelectTarget{static_cast<unsigned long long>(
                                ceil(static_cast<double>(p.top_p) * static_cast<double>(kept))),
                            -1.0, true};
  }
  if (top_p) {
    const SelectResult r = RadixSelect<true>(keys, row.vocab, p_target, s.select);
    const unsigned long long goal =
        p_target.fraction >= 0.0
            ? static_cast<unsigned long long>(
                  ceil(p_target.fraction * static_cast<double>(s.select.total_mass)))
            : p_target.absolute;
    const unsigned long long weight = r.mass_at / r.count_at;
    long long ties = static_cast<long long>(r.count_at);  // weight 0: all of them
    if (weight > 0 && goal > r.mass_before) {
      ties = static_cast<long long>((goal - r.mass_before + weight - 1) / weight);
    }
    ties = ties < 1 ? 1 : (ties > r.count_at ? r.count_at : ties);
    if (r.key < cut.key)
      cut = Cutoff{r.key, static_cast<int>(ties)};
    else if (r.key == cut.key && ties < cut.ties)
      cut.ties = static_cast<int>(ties);
  }
  return cut;
}

}  // namespace tessera::cuda
