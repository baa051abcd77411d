// On-device token sampling over [num_rows, vocab] f32 logits, one block per row, with the
// semantics of the CPU sampler (worker/sampler/sampler.h):
//   penalties -> temperature -> top-k -> top-p -> min-p -> draw;
//   - repetition penalty r (tokens in the prompt or generated): z > 0 ? z / r : z * r; then
//     z -= frequency * count + presence for generated tokens (count > 0), in f32;
//   - temperature < kSamplingGreedyTemperature: greedy = arg-max of the penalized logits, lowest
//     id on ties, no draw (also when no logit is finite);
//   - weights w = exp((z - z_max) / T) (the best token weighs 1); top-k keeps the k best
//     (larger z, then lower id); top-p keeps the shortest best-first prefix of those whose mass
//     reaches top_p of their mass (the crossing token is kept); min-p drops w < min_p;
//   - the draw: u = SamplingUniform(seed, position) (philox.cuh: Philox4x32-10 keyed by the
//     request seed, counter = token position, so a row's draw never depends on its neighbours);
//     the token is the first kept one, walking ids in ascending order, where the running kept
//     weight exceeds u * (total kept weight). (The CPU sampler walks top-k/top-p candidates
//     best-first and draws from mt19937_64: same distribution, different token for a given u.)
//   - logprobs (chosen and top-N) are the RAW log_softmax of the logits as given.
//
// Design: the kept set is always a best-first prefix in the order (z desc, id asc) intersected
// with {w >= min_p}, so it is described by a cutoff (rank key K, number j of tokens with key K
// kept in id order). top-k and top-p find their cutoffs by radix select on the 32-bit rank key
// of z (block_select.cuh: 4 histogram passes each, top-p on exact fixed-point mass); min-p is a
// direct threshold; the draw narrows the id range 8 ways per level (each warp sums the kept mass
// and cutoff ties of its contiguous part, thread 0 picks the part holding u * total): levels
// read V, V/8, V/64, ... ids until <= 256 are left, which one warp walks with warp scans and
// ballots (tie ranks by ballot prefix counts). Nothing is sorted and nothing is written to global
// scratch; the penalty list becomes a bitmap of the vocab in dynamic shared memory
// (ceil(vocab / 32) * 4 bytes: 19 KB at vocab 152k; above ~380k the kernel must opt in beyond
// CUDA's default 48 KiB, AllowSamplingSharedMemory) and penalized ids are found by binary search
// in the row's sorted list.
//
// Passes over the row's logits (each reads vocab * 4 bytes): stats (online max/sum-exp for the
// raw log-softmax + penalized arg-max) 1, read as 16-byte loads with kStatsLoadsInFlight per
// thread issued ahead of use (one block reads a whole row: what bounds it at small batches is the
// loads one SM keeps in flight; one 4-byte load per thread made a greedy step of vocab 128k take
// 223 µs on an H200); greedy stops there. Stochastic: top-k +4, top-p +4
// (its total is taken from the first histogram), draw 1 + 1/7 (the narrowing levels); top-N
// logprobs +4 (+1 to collect); `probs` output +1 read, +1 write. Typical temperature + top-p:
// ~6.2 passes; everything on: ~15, ~17 with `probs`.
// Bound (H100, 3.35 TB/s): bytes = num_rows * vocab * 4 * passes. Vocab 152k, 64 rows: 38.9 MB
// per pass = 11.6 us from HBM; the first pass is the floor, later passes re-read the row from L2
// (50 MB) when the batch's rows fit, else the bound is passes x 11.6 us. With few rows one SM per
// row cannot draw full HBM bandwidth: there the bound is per-SM (~1/132 of the chip's) and the
// kernel is latency-bound. Each pass is coalesced (consecutive threads read consecutive float4s);
// per-element work is one expf and one shared-memory bit test (penalties) plus, in histogram
// passes, the warp's bin-sharing combine (block_select.cuh) and a shared atomic per group.
// Measured on an H200, vocab 151,936 (docs/perf/gpu-h200-2026-11-27.md): greedy 72 µs at 1 row,
// 76 µs at 64; temperature + top-p + 5 logprobs over head-like logits 1.9 ms at 1 row, 2.0 ms at
// 64 (one block per row, ~12 passes, each latency-bound on the warp collectives of its
// histogram); over equal logits 1.8 ms (17.9 ms before the combine). The next step is several
// blocks per row (a split-row select with global histograms) and fewer passes (issue 26, item 4).
// Registers <= 128 (2 blocks per SM), no spills, no local memory (sm_90a/100a/120a).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/sampling_draw.cuh"
#include "kernels/cuda/sampling_row.cuh"
#include "kernels/cuda/sampling_types.h"

namespace tessera::cuda {

// One block per row. Logit is float (a template only so the header may be included anywhere).
// At most 128 registers (2 blocks of 256 per SM: 264 rows at once on 132 SMs, more in waves):
// the passes' loads in flight need them (at 64, ptxas spilled).
template <typename Logit>
__global__ void __launch_bounds__(kSamplingThreads, 2)
    SamplingKernel(const Logit* __restrict__ logits, int vocab,
                   const SamplingRowParams* __restrict__ params, SamplingPenalties penalties,
                   SamplingOutputs out) {
  static_assert(std::is_same_v<Logit, float>, "the sampler reads f32 logits");
  TESSERA_SHARED(SamplingShared, shared, 1);
  TESSERA_DYNAMIC_SHARED(uint32_t, penalty_bits);
  SamplingShared& s = shared[0];
  const int row = blockIdx.x;
  const SamplingRowParams p = params[row];
  if (!p.active) return;  // padding: the whole block leaves, nothing drawn or written
  const float* x = logits + static_cast<size_t>(row) * vocab;
  const RowLogits logit_row = MakeRowLogits(x, vocab, row, p, penalties, penalty_bits);
  const RowStats stats = ComputeRowStats(logit_row, s);
  float* probs = out.probs ? out.probs + static_cast<size_t>(row) * vocab : nullptr;
  int token = stats.argmax;
  if (p.temperature < kSamplingGreedyTemperature || stats.z_max == -INFINITY) {
    if (probs != nullptr) {
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) probs[i] = i == token ? 1.0f : 0.0f;
    }
  } else {
    token = SampleStochastic(logit_row, p, stats, s, probs);
  }
  const size_t top = static_cast<size_t>(row) * kSamplingMaxLogprobs;
  TopLogprobs(x, vocab, p.num_logprobs, stats.raw_lse, s, out.top_ids ? out.top_ids + top : nullptr,
              out.top_logprobs ? out.top_logprobs + top : nullptr);
  if (threadIdx.x == 0) {
    out.tokens[row] = token;
    out.logprobs[row] = x[token] - stats.raw_lse;
  }
}

// Dynamic shared memory of a launch with penalties: the vocab's penalty bitmap.
inline size_t SamplingPenaltyBitmapBytes(int vocab) {
  return static_cast<size_t>((vocab + 31) / 32) * sizeof(uint32_t);
}

// Lets launches at `vocab` use the bitmap's shared memory (CUDA gives 48 KiB in all unless a
// kernel opts in). Once per launcher, before the first launch (and before any graph capture);
// fails when the device cannot hold the bitmap (vocab above ~1.8M on Hopper's 227 KiB).
template <class Launcher>
auto AllowSamplingSharedMemory(Launcher& launcher, int vocab) {
  return launcher.AllowDynamicShared(SamplingKernel<float>, SamplingPenaltyBitmapBytes(vocab));
}

// logits [num_rows, vocab] f32 (finite or -inf); params [num_rows]; penalties and outputs as in
// sampling_types.h. Preconditions: num_rows >= 1; vocab >= 1, and AllowSamplingSharedMemory for
// it succeeded on this launcher; params validated (worker::ValidateSamplingParams);
// out.top_ids / top_logprobs non-null if any row has num_logprobs > 0.
template <class Launcher>
auto LaunchSampling(Launcher& launcher, const float* logits, int num_rows, int vocab,
                    const SamplingRowParams* params, const SamplingPenalties& penalties,
                    const SamplingOutputs& outputs) {
  const size_t bitmap_bytes = penalties.offsets ? SamplingPenaltyBitmapBytes(vocab) : 0;
  const LaunchShape shape{dim3(num_rows), dim3(kSamplingThreads), bitmap_bytes};
  return launcher.Launch(shape, SamplingKernel<float>, logits, vocab, params, penalties, outputs);
}

}  // namespace tessera::cuda
