// On-device token sampling over [num_rows, vocab] f32 logits (split-row passes, then one block
// per row), with the semantics of the CPU sampler (worker/sampler/sampler.h):
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
// ballots (tie ranks by ballot prefix counts). Nothing is sorted; penalized ids are found by a
// bitmap in shared memory and a binary search in the row's sorted list.
//
// Four launches (LaunchSampling). Three split-row passes, one block per (chunk of 8192 ids,
// row) (sampling_chunks.cuh): the chunks' statistics; for rows that sample with a filter or
// want logprobs a sweep of thresholds below the row's best; and the collection of the smallest
// candidate list that provably holds every id the row can keep or report. Then the finish, one
// block per row (SamplingKernel below): statistics merged in chunk order; greedy is the arg-max;
// a stochastic row runs the radix selects and the draw over its candidates (a few hundred ids
// for a peaked row) when the plan found them and the cutoff lies among them; a row without any
// filter draws within the one chunk its target falls in (by the chunks' masses); else the whole
// vocab as before (flat rows, too many candidates, or `probs` asked for without a filter); top-N
// logprobs likewise from candidates. The cutoff over candidates is the whole vocab's bit for bit
// (the same fixed-point masses, top-p's target from the whole row's exact mass); the draw's f32
// running sums differ in order from a whole-vocab walk, so a token can differ only where
// u * total falls within rounding of a boundary (the reference's margin rule). The penalty
// bitmap of the full path is in dynamic shared memory (ceil(vocab / 32) * 4 bytes: 19 KB at
// vocab 152k; above ~380k the kernel must opt in beyond CUDA's default 48 KiB,
// AllowSamplingSharedMemory).
//
// Bound (design; H100 3.35 TB/s, vocab 152k, 64 rows: 38.9 MB of logits, L2 holds them after
// the first read): greedy: one split read (~12 us at HBM rate over 19 x 64 blocks) and the
// finish; a peaked row with top-k/top-p/min-p and logprobs: three split reads (the later from
// L2) and a finish over <= 4096 candidates: ~30-40 us for the step, against 1.9-2.0 ms measured
// for the one-block-per-row version (docs/perf/gpu-h200-2026-11-27.md: ~12 latency-bound passes
// of 600 KB per block); temperature alone: two split reads and a draw over one 8192-id chunk.
// Rows that take the full path cost what they did (flat rows ~12 passes). Measured on an H200
// (docs/perf/gpu-h200-2026-11-28.md, BM_Sampling): greedy 28 / 58 us at 1 / 64 rows; peaked
// rows with top-p and logprobs, all on candidates, 116 / 236 / 702 us at 1 / 64 / 256 rows: 8.6x
// the full path at 64 rows, but 6x the design's bound (not profiled yet).
// Registers <= 128 (2 blocks per SM), no spills, no local memory (sm_90a/100a/120a).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/launch_status.h"
#include "kernels/cuda/sampling_chunks.cuh"
#include "kernels/cuda/sampling_draw.cuh"
#include "kernels/cuda/sampling_row.cuh"
#include "kernels/cuda/sampling_types.h"

namespace tessera::cuda {

// A row's candidate list (sampling_chunks.cuh), in id order: the chunks' lists one after another.
struct CandidateList {
  const int32_t* ids;
  const float* penalized;
  const float* raw;
  int count;
};

// Candidates each chunk reserved room for: its counts at the plan's levels (>= what it wrote,
// when both kinds are kept and some ids are both).
__device__ __forceinline__ int ReservedCandidates(const SamplingChunkSweep& sweep,
                                                  const CandidatePlan& plan) {
  int reserved = 0;
  if (plan.level >= 0) reserved += static_cast<int>(sweep.count[plan.level]);
  if (plan.raw_level >= 0) reserved += static_cast<int>(sweep.raw_count[plan.raw_level]);
  return reserved;
}

// The row's candidate list made contiguous: chunk c's list moves down from its reserved offset
// to the end of chunk c - 1's (tile by tile, each tile read before any of it is written; a
// destination never reaches a source not yet read, since every move is downwards). Block-wide.
__device__ __forceinline__ CandidateList RowCandidates(const SamplingWorkspaceView& work, int row,
                                                       int chunks, const CandidatePlan& plan) {
  const size_t at = static_cast<size_t>(row) * kSamplingCandidates;
  const int32_t* counts = work.chunk_counts + static_cast<size_t>(row) * chunks;
  const SamplingChunkSweep* sweeps = work.sweep + static_cast<size_t>(row) * chunks;
  int32_t* ids = work.ids + at;
  float* penalized = work.penalized + at;
  float* raw = work.raw + at;
  int reserved = 0, count = 0;
  for (int c = 0; c < chunks; ++c) {
    for (int tile = 0; reserved != count && tile < counts[c]; tile += kSamplingThreads) {
      const int from = reserved + tile + static_cast<int>(threadIdx.x);
      const bool in = tile + static_cast<int>(threadIdx.x) < counts[c];
      const int32_t id = in ? ids[from] : 0;
      const float z = in ? penalized[from] : 0.0f, x = in ? raw[from] : 0.0f;
      __syncthreads();
      if (in) {
        const int to = count + tile + static_cast<int>(threadIdx.x);
        ids[to] = id;
        penalized[to] = z;
        raw[to] = x;
      }
      __syncthreads();
    }
    reserved += ReservedCandidates(sweeps[c], plan);
    count += counts[c];
  }
  return CandidateList{ids, penalized, raw, count};
}

// Whether the cutoff found over the candidates is the whole vocab's (or what it keeps is): a
// top-k set beyond the candidates is harmless only when min-p bounds the kept ids to them and no
// top-p target depends on that set's mass; a top-p crossing beyond them only when min-p does.
__device__ __forceinline__ bool CandidatesHoldKeptSet(const SamplingRowParams& p, int vocab,
                                                      const CandidatePlan& plan,
                                                      const Cutoff& cut) {
  const bool top_k = p.top_k > 0 && p.top_k < vocab;
  const bool top_p = p.top_p < 1.0f;
  return (!top_k || cut.k_reached || (plan.min_p_holds && !top_p)) &&
         (!top_p || cut.p_reached || plan.min_p_holds);
}

// A row without filters: every id may be drawn, so the draw picks the chunk where u * (the
// row's kept mass, summed over the chunks' masses in chunk order) falls, then narrows within
// that chunk alone with the rest of the target. Returns the token (block-uniform).
__device__ __forceinline__ int DrawInChunk(const float* x, int vocab, int row,
                                           const SamplingRowParams& p, const MergedStats& merged,
                                           const SamplingChunkSweep* sweeps, int chunks,
                                           const SamplingPenalties& penalties,
                                           uint32_t* penalty_bits, SamplingShared& s) {
  float total = 0.0f;
  for (int c = 0; c < chunks; ++c) total += sweeps[c].kept;
  const float target = SamplingUniform(p.seed, p.position) * total;
  // The first chunk whose running mass passes the target, else the last one with mass.
  float cum = 0.0f, chosen_cum = 0.0f;
  int chosen = -1;
  for (int c = 0; c < chunks; ++c) {
    if (sweeps[c].kept <= 0.0f) continue;
    chosen = c;
    chosen_cum = cum;
    if (target < cum + sweeps[c].kept) break;
    cum += sweeps[c].kept;
  }
  if (chosen < 0) return merged.stats.argmax;
  const int begin = chosen * kSamplingChunk;
  const int size = vocab - begin < kSamplingChunk ? vocab - begin : kSamplingChunk;
  const RowLogits chunk = MakeRowLogits(x, vocab, row, p, penalties, penalty_bits, begin, size);
  const DrawContext c{chunk, merged.stats.z_max, 1.0f / p.temperature, p.min_p,
                      Cutoff{0xFFFFFFFFu, INT_MAX}};
  const float rest = target - chosen_cum;
  return Draw(c, 0.0f, merged.stats.argmax, s, begin, begin + size, rest > 0.0f ? rest : 0.0f);
}

// The stochastic draw of a row: over its candidates when the plan has them and the cutoff is
// found among them, else over the whole vocab. Returns the token; *path says which.
__device__ __forceinline__ int SampleRow(const float* x, int vocab, int row,
                                         const SamplingRowParams& p, const MergedStats& merged,
                                         const CandidatePlan& plan, const CandidateList& list,
                                         const SamplingChunkSweep* sweeps, int chunks,
                                         const SamplingPenalties& penalties,
                                         uint32_t* penalty_bits, SamplingShared& s, float* probs,
                                         SamplingPath* path) {
  const float inv_t = 1.0f / p.temperature;
  const float z_max = merged.stats.z_max;
  if (plan.chunk_draw && probs == nullptr) {
    *path = SamplingPath::kChunkDraw;
    return DrawInChunk(x, vocab, row, p, merged, sweeps, chunks, penalties, penalty_bits, s);
  }
  if (!plan.full && plan.level >= 0) {
    const RowLogits candidates{list.penalized, list.count, nullptr, nullptr, nullptr, nullptr, 0,
                               1.0f, 0.0f, 0.0f};
    const Cutoff cut = FindCutoff(candidates, vocab, p, z_max, inv_t, &plan.vocab_mass, s);
    if (CandidatesHoldKeptSet(p, vocab, plan, cut)) {
      *path = SamplingPath::kCandidates;
      return DrawKept(candidates, p, z_max, cut, list.ids, vocab, merged.stats.argmax, s, probs);
    }
  }
  *path = SamplingPath::kFullRows;
  const RowLogits whole = MakeRowLogits(x, vocab, row, p, penalties, penalty_bits);
  const Cutoff cut = FindCutoff(whole, vocab, p, z_max, inv_t, nullptr, s);
  return DrawKept(whole, p, z_max, cut, nullptr, vocab, merged.stats.argmax, s, probs);
}

// The finishing pass, one block per row, after the split-row passes (sampling_chunks.cuh).
// Logit is float (a template only so the header may be included anywhere). At most 128
// registers (2 blocks of 256 per SM): the full path's loads in flight need them.
template <typename Logit>
__global__ void __launch_bounds__(kSamplingThreads, 2)
    SamplingKernel(const Logit* __restrict__ logits, int vocab,
                   const SamplingRowParams* __restrict__ params, SamplingPenalties penalties,
                   SamplingOutputs out, SamplingWorkspaceView work, int chunks) {
  static_assert(std::is_same_v<Logit, float>, "the sampler reads f32 logits");
  TESSERA_SHARED(SamplingShared, shared, 1);
  TESSERA_DYNAMIC_SHARED(uint32_t, penalty_bits);
  SamplingShared& s = shared[0];
  const int row = blockIdx.x;
  const SamplingRowParams p = params[row];
  if (!p.active) return;  // padding: the whole block leaves, nothing drawn or written
  const size_t first = static_cast<size_t>(row) * chunks;
  const MergedStats merged = MergeChunkStats(work.stats + first, chunks, TemperedScale(p));
  const RowStats& stats = merged.stats;
  CandidatePlan plan;
  if (NeedsSweep(p, stats)) plan = ChoosePlan(p, merged, work.sweep + first, chunks, vocab);
  const bool has_candidates = !plan.full && (plan.level >= 0 || plan.raw_level >= 0);
  const CandidateList list = has_candidates ? RowCandidates(work, row, chunks, plan)
                                            : CandidateList{nullptr, nullptr, nullptr, 0};
  const float* x = logits + static_cast<size_t>(row) * vocab;
  float* probs = out.probs ? out.probs + static_cast<size_t>(row) * vocab : nullptr;
  int token = stats.argmax;
  SamplingPath path = SamplingPath::kStatsOnly;
  if (!DrawsStochastically(p, stats)) {
    if (probs != nullptr) {
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) probs[i] = i == token ? 1.0f : 0.0f;
    }
  } else {
    token = SampleRow(x, vocab, row, p, merged, plan, list, work.sweep + first, chunks, penalties,
                      penalty_bits, s, probs, &path);
  }
  const size_t top = static_cast<size_t>(row) * kSamplingMaxLogprobs;
  int32_t* top_ids = out.top_ids ? out.top_ids + top : nullptr;
  float* top_logprobs = out.top_logprobs ? out.top_logprobs + top : nullptr;
  if (p.num_logprobs > 0 && !plan.full && plan.raw_level >= 0) {
    TopLogprobs(list.raw, list.count, p.num_logprobs, stats.raw_lse, s, list.ids, top_ids,
                top_logprobs);
    if (path == SamplingPath::kStatsOnly) path = SamplingPath::kCandidates;
  } else {
    if (p.num_logprobs > 0) path = SamplingPath::kFullRows;
    TopLogprobs(x, vocab, p.num_logprobs, stats.raw_lse, s, nullptr, top_ids, top_logprobs);
  }
  if (threadIdx.x == 0) {
    out.tokens[row] = token;
    out.logprobs[row] = x[token] - stats.raw_lse;
    work.paths[row] = static_cast<int32_t>(path);
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
// sampling_types.h; workspace: SamplingWorkspaceBytes(num_rows or more, vocab) bytes of device
// memory, 256-byte aligned, the same size at every launch of a captured graph's shape.
// Preconditions: num_rows >= 1; vocab >= 1, and AllowSamplingSharedMemory for it succeeded on
// this launcher; params validated (sampling::ValidateSamplingParams); out.top_ids / top_logprobs
// non-null if any row has num_logprobs > 0. Four launches: the split-row passes, then the finish.
template <class Launcher>
auto LaunchSampling(Launcher& launcher, const float* logits, int num_rows, int vocab,
                    const SamplingRowParams* params, const SamplingPenalties& penalties,
                    const SamplingOutputs& outputs, void* workspace) {
  const SamplingWorkspaceView work = SamplingWorkspaceAt(workspace, num_rows, vocab);
  const int chunks = SamplingChunkCount(vocab);
  const LaunchShape split{dim3(chunks, num_rows), dim3(kSelectThreads), 0};
  auto status = launcher.Launch(split, SamplingChunkStatsKernel<float>, logits, vocab, params,
                                penalties, work);
  if (!LaunchSucceeded(status)) return status;
  status = launcher.Launch(split, SamplingSweepKernel<float>, logits, vocab, params, penalties,
                           work);
  if (!LaunchSucceeded(status)) return status;
  status = launcher.Launch(split, SamplingCollectKernel<float>, logits, vocab, params, penalties,
                           work);
  if (!LaunchSucceeded(status)) return status;
  const size_t bitmap_bytes = penalties.offsets ? SamplingPenaltyBitmapBytes(vocab) : 0;
  const LaunchShape finish{dim3(num_rows), dim3(kSamplingThreads), bitmap_bytes};
  return launcher.Launch(finish, SamplingKernel<float>, logits, vocab, params, penalties,
                         outputs, work, chunks);
}

}  // namespace tessera::cuda
