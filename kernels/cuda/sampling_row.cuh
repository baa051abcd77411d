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
  // Penalized ids as bits (shared memory), word w for ids [32 (first_word + w), +32): the whole
  // row's (first_word 0) or one chunk's; null: no penalties.
  const uint32_t* bits;
  const int32_t* tokens;
  const int32_t* counts;
  const uint8_t* in_prompt;
  int num_entries;
  float repetition, presence, frequency;
  int first_word = 0;

  __device__ __forceinline__ float Penalized(int i) const { return Penalized(i, x[i]); }
  // The same for id i whose raw logit z the caller already loaded.
  __device__ __forceinline__ float Penalized(int i, float z) const {
    if (bits == nullptr || ((bits[(i >> 5) - first_word] >> (i & 31)) & 1u) == 0) return z;
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

// The row's logits with its penalties as a bitmap over ids [first_id, first_id + count)
// (first_id a multiple of 32; the whole row: 0, vocab) in `bits` (shared, ceil(count / 32)
// words), built when the row has penalties (block-uniform decision).
__device__ __forceinline__ RowLogits MakeRowLogits(const float* x, int vocab, int row,
                                                   const SamplingRowParams& p,
                                                   const SamplingPenalties& penalties,
                                                   uint32_t* bits, int first_id = 0,
                                                   int count = -1) {
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
  if (count < 0) count = vocab;
  const int words = (count + 31) / 32;
  for (int w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0u;
  __syncthreads();
  // Ids are distinct, so adding distinct bits is an OR.
  for (int e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const int token = penalties.tokens[e] - first_id;
    if (token >= 0 && token < count) atomicAdd(&bits[token >> 5], 1u << (token & 31));
  }
  __syncthreads();
  r.bits = bits;
  r.first_word = first_id >> 5;
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

// Merges (max, sum of exp((x - max) * scale)) pairs; -inf maxima contribute nothing. scale 1:
// the raw softmax; 1 / T: the tempered weights of the penalized logits.
__device__ __forceinline__ void MergeSoftmax(float* max, float* sum, float other_max,
                                             float other_sum, float scale = 1.0f) {
  const float merged = fmaxf(*max, other_max);
  const float mine = *max == -INFINITY ? 0.0f : *sum * expf((*max - merged) * scale);
  const float theirs =
      other_max == -INFINITY ? 0.0f : other_sum * expf((other_max - merged) * scale);
  *max = merged;
  *sum = mine + theirs;
}

// One thread's share of a chunk's statistics: online raw max / sum-exp, the penalized arg-max
// and (inv_t > 0) the sum of tempered weights exp((z - best) * inv_t) relative to it.
struct StatsAccumulator {
  float max = -INFINITY, sum = 0.0f, best = -INFINITY, tempered = 0.0f;
  int best_id = INT_MAX;

  __device__ __forceinline__ void Add(const RowLogits& row, int i, float x, float inv_t) {
    if (x > max) {
      sum = sum * expf(max - x) + 1.0f;
      max = x;
    } else if (x != -INFINITY) {
      sum += expf(x - max);
    }
    const float z = row.Penalized(i, x);
    if (inv_t > 0.0f && z != -INFINITY) {
      if (z > best) {
        tempered = best == -INFINITY ? 1.0f : tempered * expf((best - z) * inv_t) + 1.0f;
      } else {
        tempered += expf((z - best) * inv_t);
      }
    }
    if (RanksBefore(z, i, best, best_id)) {
      best = z;
      best_id = i;
    }
  }
};

// The kept set: tokens with key < key, the first `ties` (in id order) with key == key, and
// (min_p > 0) only those with weight >= min_p. k_reached / p_reached: the top-k / top-p select
// found its target among the elements searched (always, over the whole vocab; over candidates,
// what tells whether they held the cutoff: sampling.cuh's CandidatesHoldKeptSet).
struct Cutoff {
  uint32_t key;
  int ties;
  bool k_reached = true;
  bool p_reached = true;
};

// Top-k then top-p cutoffs by radix select over the elements of `row` (the vocab, or a
// candidate subset that holds the kept set, in id order). `vocab` is the row's vocab size (top-k
// is off at k >= vocab); `vocab_mass` (candidates) is the exact fixed-point mass of the whole
// vocab, which top-p alone takes its target from (over the whole vocab: null, the first
// histogram's total).
__device__ __forceinline__ Cutoff FindCutoff(const RowLogits& row, int vocab,
                                             const SamplingRowParams& p, float z_max, float inv_t,
                                             const unsigned long long* vocab_mass,
                                             SamplingShared& s) {
  Cutoff cut{0xFFFFFFFFu, INT_MAX};
  const WeightedKeys keys{row, z_max, inv_t};
  const bool top_k = p.top_k > 0 && p.top_k < vocab;
  const bool top_p = p.top_p < 1.0f;
  // Fraction of the whole vocab's mass, or the same target made absolute.
  SelectTarget p_target{0, static_cast<double>(p.top_p), true};
  if (vocab_mass != nullptr) {
    p_target = SelectTarget{static_cast<unsigned long long>(ceil(
                                static_cast<double>(p.top_p) * static_cast<double>(*vocab_mass))),
                            -1.0, true};
  }
  if (top_k) {
    const unsigned long long k = static_cast<unsigned long long>(p.top_k);
    const SelectResult r = top_p ? RadixSelect<true>(keys, row.vocab, {k, -1.0, false}, s.select)
                                 : RadixSelect<false>(keys, row.vocab, {k, -1.0, false}, s.select);
    cut = Cutoff{r.key, static_cast<int>(k - r.count_before)};
    cut.k_reached = r.count_before + r.count_at >= k;
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
    const bool p_reached = r.mass_before + r.mass_at >= goal;
    const unsigned long long weight = r.mass_at / r.count_at;
    long long ties = static_cast<long long>(r.count_at);  // weight 0: all of them
    if (weight > 0 && goal > r.mass_before) {
      ties = static_cast<long long>((goal - r.mass_before + weight - 1) / weight);
    }
    ties = ties < 1 ? 1 : (ties > r.count_at ? r.count_at : ties);
    if (r.key < cut.key) {
      cut.key = r.key;
      cut.ties = static_cast<int>(ties);
    } else if (r.key == cut.key && ties < cut.ties) {
      cut.ties = static_cast<int>(ties);
    }
    cut.p_reached = p_reached;
  }
  return cut;
}

}  // namespace tessera::cuda
