// Block-wide building blocks of the sampler (sampling.cuh): 256-thread inclusive scans, a
// (value, lowest index) arg-max, and a radix select over 32-bit rank keys that finds the element
// where a best-first running count or running mass first reaches a target, in four passes of
// 8-bit digits with shared-memory histograms. No sort, no global scratch.
//
// Histogram contention: the first digit of real logits (sign and exponent) falls in a handful of
// bins, and equal logits all fall in one. Per-lane atomics on one shared address serialize (a
// 64-bit shared atomicAdd is a compare-and-swap loop), which made top-p + 5 logprobs over 64 rows
// of 151,936 equal logits take 17.9 ms on an H200 (docs/perf/gpu-h200-2026-11-27.md). So each
// warp first combines the lanes of its 32 elements that share a bin (up to kHotBinRounds groups,
// the lowest pending lane's bin first: one ballot, one shuffle and a warp sum each) into one
// atomic per group; the lanes left add alone, and their bins mostly differ.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_compat.cuh"

namespace tessera::cuda {

inline constexpr int kSelectThreads = 256;  // one histogram bin per thread
inline constexpr int kSelectWarps = kSelectThreads / 32;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;
inline constexpr int kHotBinRounds = 4;  // groups of a shared bin combined per 32-element batch

// Rank key of a value: a smaller key means a larger value (best first); -0 and +0 share a key.
__device__ __forceinline__ uint32_t DescendingKey(float value) {
  const uint32_t bits = __float_as_uint(value + 0.0f);  // -0 + 0 == +0
  const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ~ascending;
}

// The value whose DescendingKey is `key`.
__device__ __forceinline__ float KeyValue(uint32_t key) {
  const uint32_t ascending = ~key;
  return __uint_as_float((ascending & 0x80000000u) ? (ascending & 0x7FFFFFFFu) : ~ascending);
}

// Weight w in [0, 1] as fixed point with 40 fractional bits (truncated): integer sums are exact
// and independent of the order of summation (so of the schedule), and 2^18 of them fit in 64
// bits. A weight below 2^-40 counts as 0 for top-p mass.
__device__ __forceinline__ unsigned long long FixedMass(float weight) {
  return static_cast<unsigned long long>(weight * 0x1.0p40f);
}

template <typename T>
__device__ __forceinline__ T WarpInclusiveScan(T value) {
  const int lane = threadIdx.x % 32;
  for (int delta = 1; delta < 32; delta <<= 1) {
    const T other = __shfl_up_sync(kFullMask, value, delta);
    if (lane >= delta) value += other;
  }
  return value;
}

// The sum over the warp, in every lane. Precondition: all 32 lanes call it.
template <typename T>
__device__ __forceinline__ T WarpSum(T value) {
  for (int delta = 16; delta > 0; delta >>= 1) value += __shfl_xor_sync(kFullMask, value, delta);
  return value;
}

// Inclusive scan over the block in thread order. Preconditions: blockDim.x == kSelectThreads,
// every thread calls it, `warp_totals` holds kSelectWarps T of shared memory.
template <typename T>
__device__ __forceinline__ T BlockInclusiveScan(T value, T* warp_totals) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  value = WarpInclusiveScan(value);
  if (lane == 31) warp_totals[warp] = value;
  __syncthreads();
  T offset = 0;
  for (int w = 0; w < warp; ++w) offset += warp_totals[w];
  __syncthreads();  // warp_totals may be reused after this
  return value + offset;
}

// "(value_a, a) ranks before (value_b, b)": larger value, then lower index.
__device__ __forceinline__ bool RanksBefore(float value_a, int a, float value_b, int b) {
  return value_a > value_b || (value_a == value_b && a < b);
}

// Whole-block arg-max (lowest index on ties) of per-thread candidates; the result goes to every
// thread. Same preconditions as BlockInclusiveScan; scratch_value/scratch_index: kSelectWarps.
__device__ __forceinline__ void BlockArgMax(float* value, int* index, float* scratch_value,
                                            int* scratch_index) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_value = __shfl_xor_sync(kFullMask, *value, offset);
    const int other_index = __shfl_xor_sync(kFullMask, *index, offset);
    if (RanksBefore(other_value, other_index, *value, *index)) {
      *value = other_value;
      *index = other_index;
    }
  }
  if (threadIdx.x % 32 == 0) {
    scratch_value[threadIdx.x / 32] = *value;
    scratch_index[threadIdx.x / 32] = *index;
  }
  __syncthreads();
  for (int w = 0; w < kSelectWarps; ++w) {
    if (RanksBefore(scratch_value[w], scratch_index[w], *value, *index)) {
      *value = scratch_value[w];
      *index = scratch_index[w];
    }
  }
  __syncthreads();
}

// Shared memory of one RadixSelect.
struct SelectShared {
  unsigned int count[kSelectThreads];
  unsigned long long mass[kSelectThreads];
  unsigned int count_totals[kSelectWarps];
  unsigned long long mass_totals[kSelectWarps];
  int first_bin;
  int last_bin;
  // Written by the chosen bin's thread alone (no read-modify-write of shared memory: a compiler
  // may hoist the read of such an update to every thread, a race compute-sanitizer reports).
  unsigned int chosen_count_before;         // elements in the bins before the chosen one
  unsigned long long chosen_mass_before;  // their mass
  unsigned int count_at;
  unsigned long long mass_at;
  unsigned long long total_mass;
};

// The element where the running measure, taken over elements in ascending key order, first
// reaches the target: `key` is its key; count_before / mass_before are the number and mass of
// elements with a smaller key; count_at / mass_at those of the elements with exactly `key`.
struct SelectResult {
  uint32_t key;
  unsigned int count_before;
  unsigned long long mass_before;
  unsigned int count_at;
  unsigned long long mass_at;
};

// What the running measure must reach: a count (the target-th element, 1-based) or, by_mass, a
// fixed-point mass (needs kWithMass); with `fraction` >= 0 the mass target is
// ceil(fraction * total mass of all elements) instead of `absolute`.
struct SelectTarget {
  unsigned long long absolute;
  double fraction;
  bool by_mass;
};

// float4 loads each thread keeps in flight in a pass over a row (ForEachRowElement): one block
// reads a whole row, so a pass's speed is what its loads in flight allow (Little's law).
inline constexpr int kSelectLoadsInFlight = 4;

// Calls visit(i, x[i]) for every i in [0, size), whole warps together: every lane of a warp makes
// the same number of calls, lanes past the end with i = -1 (so visit may use warp collectives).
// A row that starts 16-byte aligned is read as float4s, kSelectLoadsInFlight per thread issued
// before any is used; its last size % 4 elements, and an unaligned row, one element per lane.
// Precondition: blockDim.x == kSelectThreads.
template <class Visit>
__device__ __forceinline__ void ForEachRowElement(const float* x, int size, Visit&& visit) {
  const int lane = threadIdx.x % 32;
  const int warp_first = threadIdx.x - lane;
  int tail = 0;
  if (reinterpret_cast<uintptr_t>(x) % sizeof(float4) == 0) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int vectors = size / 4;
    for (int first = warp_first; first < vectors; first += kSelectThreads * kSelectLoadsInFlight) {
      float4 loaded[kSelectLoadsInFlight];
      TESSERA_UNROLL for (int u = 0; u < kSelectLoadsInFlight; ++u) {
        const int v = first + lane + u * kSelectThreads;
        if (v < vectors) loaded[u] = __ldg(&x4[v]);
      }
      TESSERA_UNROLL for (int u = 0; u < kSelectLoadsInFlight; ++u) {
        if (first + u * kSelectThreads >= vectors) break;  // warp-uniform
        const int v = first + lane + u * kSelectThreads;
        const bool in = v < vectors;
        visit(in ? 4 * v : -1, loaded[u].x);
        visit(in ? 4 * v + 1 : -1, loaded[u].y);
        visit(in ? 4 * v + 2 : -1, loaded[u].z);
        visit(in ? 4 * v + 3 : -1, loaded[u].w);
      }
    }
    tail = vectors * 4;
  }
  for (int first = tail + warp_first; first < size; first += kSelectThreads) {
    const int i = first + lane;
    visit(i < size ? i : -1, i < size ? x[i] : 0.0f);
  }
}

// Adds one lane's element (when `counted`: it matches the digits chosen so far) to bin `bin` of
// the pass's histogram, combining the lanes of the warp that share a bin first (see the header
// comment). Precondition: all 32 lanes of the warp call it, with the same kWithMass.
template <bool kWithMass>
__device__ __forceinline__ void HistogramAdd(bool counted, unsigned bin, unsigned long long mass,
                                             SelectShared& s) {
  const int lane = threadIdx.x % 32;
  unsigned pending = __ballot_sync(kFullMask, counted);
  for (int round = 0; round < kHotBinRounds && pending != 0; ++round) {
    const int leader = __ffs(pending) - 1;
    const unsigned leader_bin = __shfl_sync(kFullMask, bin, leader);
    const bool in_group = counted && bin == leader_bin;
    const unsigned group = __ballot_sync(kFullMask, in_group);
    if (__popc(group) < 2) break;  // warp-uniform: the rest are left to per-lane atomics
    const unsigned long long group_mass = kWithMass ? WarpSum(in_group ? mass : 0ull) : 0ull;
    if (lane == leader) {
      atomicAdd(&s.count[leader_bin], static_cast<unsigned>(__popc(group)));
      if (kWithMass) atomicAdd(&s.mass[leader_bin], group_mass);
    }
    counted = counted && !in_group;
    pending &= ~group;
  }
  if (!counted) return;
  atomicAdd(&s.count[bin], 1u);
  if (kWithMass) atomicAdd(&s.mass[bin], mass);
}

// Radix select over the `size` elements of the row source.data(): source.Key(i, x) gives element
// i's rank key from its value x and source.Mass(key) the fixed-point mass of an element with that
// key (histogrammed only when kWithMass: needed to select by mass, or for the caller's use of
// mass_before / mass_at). Four passes, one per 8-bit digit of the key from the top:
// each histograms the elements that match the digits chosen so far, scans the 256 bins and keeps
// the first bin whose running measure reaches the target (or, when rounding leaves the target out
// of reach, the last non-empty bin). Same preconditions as BlockInclusiveScan; `s` is shared.
template <bool kWithMass, class Source>
__device__ __forceinline__ SelectResult RadixSelect(const Source& source, int size,
                                                    SelectTarget target, SelectShared& s) {
  const int tid = threadIdx.x;
  unsigned int count_before = 0;  // the same in every thread
  unsigned long long mass_before = 0;
  uint32_t prefix = 0;
  uint32_t mask = 0;
  unsigned long long goal = target.absolute;
  for (int shift = 24; shift >= 0; shift -= 8) {
    s.count[tid] = 0;
    s.mass[tid] = 0;
    if (tid == 0) {
      s.first_bin = kSelectThreads;
      s.last_bin = -1;
    }
    __syncthreads();
    ForEachRowElement(source.data(), size, [&](int i, float x) {
      const uint32_t key = i >= 0 ? source.Key(i, x) : 0u;
      const bool counted = i >= 0 && (key & mask) == prefix;
      const unsigned long long mass = kWithMass && counted ? source.Mass(key) : 0ull;
      HistogramAdd<kWithMass>(counted, (key >> shift) & 0xFFu, mass, s);
    });
    __syncthreads();
    const unsigned int count = s.count[tid];
    const unsigned long long mass = s.mass[tid];
    const unsigned int count_incl = BlockInclusiveScan(count, s.count_totals);
    unsigned long long mass_incl = 0;
    if (kWithMass) {
      mass_incl = BlockInclusiveScan(mass, s.mass_totals);
      if (target.fraction >= 0.0 && shift == 24) {
        if (tid == kSelectThreads - 1) s.total_mass = mass_incl;
        __syncthreads();
        goal = static_cast<unsigned long long>(
            ceil(target.fraction * static_cast<double>(s.total_mass)));
      }
    }
    const unsigned long long reached =
        target.by_mass ? mass_before + mass_incl : count_before + count_incl;
    if (count > 0) {
      if (reached >= goal) atomicMin(&s.first_bin, tid);
      atomicMax(&s.last_bin, tid);
    }
    __syncthreads();
    const int bin = s.first_bin < kSelectThreads ? s.first_bin : s.last_bin;
    if (tid == bin) {
      s.chosen_count_before = count_incl - count;
      s.chosen_mass_before = mass_incl - mass;
      s.count_at = count;
      s.mass_at = mass;
    }
    __syncthreads();
    count_before += s.chosen_count_before;
    mass_before += s.chosen_mass_before;
    prefix |= static_cast<uint32_t>(bin) << shift;
    mask |= 0xFFu << shift;
  }
  const SelectResult result{prefix, count_before, mass_before, s.count_at, s.mass_at};
  __syncthreads();  // the next select may reset s
  return result;
}

}  // namespace tessera::cuda
