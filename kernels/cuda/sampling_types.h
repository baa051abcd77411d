// The inputs and outputs of the on-device sampler (sampling.cuh), plain C++ so the CPU reference
// (sampling_reference.h) and the worker share them with the kernel. Semantics follow the CPU
// sampler (worker/sampler/sampler.h); see sampling.cuh for the algorithm.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::cuda {

// Rows may ask for up to this many top logprobs (sampling::kMaxLogprobs).
inline constexpr int kSamplingMaxLogprobs = 20;
// Temperatures below this sample greedily (sampling::kGreedyTemperature).
inline constexpr float kSamplingGreedyTemperature = 1e-5f;

// One row's request state, validated by the worker (sampling::ValidateSamplingParams).
struct SamplingRowParams {
  float temperature = 1.0f;         // < kSamplingGreedyTemperature: greedy, no draw
  int32_t top_k = 0;                // <= 0 or >= vocab: off
  float top_p = 1.0f;               // in (0, 1]; >= 1: off
  float min_p = 0.0f;               // in [0, 1]; <= 0: off
  float repetition_penalty = 1.0f;  // > 0; 1: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t num_logprobs = 0;  // in [0, min(kSamplingMaxLogprobs, vocab)]
  uint64_t seed = 0;         // the request's Philox key
  // The Philox counter: the position of the token being sampled in its sequence (prompt length +
  // tokens generated so far). Draws depend only on (seed, position), so a request preempted and
  // resumed, or batched with other rows, draws the same numbers (no generator state to replay).
  uint64_t position = 0;
  int32_t active = 1;  // 0: a padding row; it writes nothing and draws nothing
};

// Penalty state of every row in CSR form (maintained per slot by the worker). For row r the
// entries are [offsets[r], offsets[r + 1]):
//   offsets          [num_rows + 1] int32, offsets[0] == 0, non-decreasing
//   tokens           [nnz] int32, each row's ids strictly ascending, in [0, vocab)
//   generated_counts [nnz] int32 >= 0: times the token occurs in the generated output
//   in_prompt        [nnz] uint8: 1 if the token occurs in the prompt
// A token with count 0 and in_prompt 0 may be listed (it is not penalized). All pointers null:
// no penalties for any row.
struct SamplingPenalties {
  const int32_t* offsets = nullptr;
  const int32_t* tokens = nullptr;
  const int32_t* generated_counts = nullptr;
  const uint8_t* in_prompt = nullptr;
};

// Where results go (device memory). Active rows only; padding rows' entries are left untouched.
//   tokens        [num_rows] int32: the sampled token
//   logprobs      [num_rows] f32: raw log_softmax(logits)[token]
//   top_ids       [num_rows, kSamplingMaxLogprobs] int32: the num_logprobs best raw logits, best
//                 first (ties: lower id); entries past num_logprobs are set to -1. May be null
//                 when every row has num_logprobs == 0.
//   top_logprobs  [num_rows, kSamplingMaxLogprobs] f32: their raw logprobs (-inf past the end).
//   probs         [num_rows, vocab] f32, optional (null: skipped): the final sampling
//                 distribution after penalties, temperature and filtering (0 for dropped
//                 tokens); one-hot on the token for greedy rows.
struct SamplingOutputs {
  int32_t* tokens = nullptr;
  float* logprobs = nullptr;
  int32_t* top_ids = nullptr;
  float* top_logprobs = nullptr;
  float* probs = nullptr;
};


// The split-row sampler's scratch (sampling_chunks.cuh): each row's vocab in chunks of
// kSamplingChunk ids, a sweep over kSamplingLevels thresholds, up to kSamplingCandidates ids.
inline constexpr int kSamplingChunk = 8192;       // a multiple of 1024
inline constexpr int kSamplingLevels = 8;
inline constexpr int kSamplingCandidates = 4096;

constexpr int SamplingChunkCount(int vocab) { return (vocab + kSamplingChunk - 1) / kSamplingChunk; }

struct SamplingChunkStats {
  float raw_max, raw_sum;  // raw softmax of the chunk
  float best;              // penalized max, id best_id (lowest on ties)
  int32_t best_id;
  float tempered;  // sum of exp((z - best) / T) over the chunk (stochastic rows)
};

struct SamplingChunkSweep {
  uint32_t count[kSamplingLevels];      // ids with a >= -d_j
  uint32_t raw_count[kSamplingLevels];  // raw logits >= raw_max - d_j
  float below[kSamplingLevels];         // f32 weight of the ids with a < -d_j
  float kept;                           // f32 weight of the chunk (the chunked draw's)
  unsigned long long mass;              // exact fixed-point weight of the chunk
};

// How the finishing kernel served a row (kept in the workspace, for tests and benchmarks).
// kChunkDraw: a row without filters drew within the one chunk its target fell in.
enum class SamplingPath : int32_t { kStatsOnly = 0, kCandidates = 1, kFullRows = 2, kChunkDraw = 3 };

// Where each row's scratch lives in the workspace.
struct SamplingWorkspaceView {
  SamplingChunkStats* stats;  // [rows, chunks]
  SamplingChunkSweep* sweep;  // [rows, chunks]
  int32_t* chunk_counts;      // [rows, chunks] candidates each chunk wrote
  int32_t* ids;               // [rows, kSamplingCandidates]
  float* penalized;           // [rows, kSamplingCandidates]
  float* raw;                 // [rows, kSamplingCandidates]
  int32_t* paths;             // [rows]: the SamplingPath of the row at the last launch
};

constexpr size_t SamplingAlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The view of a workspace laid out for `rows` rows at `vocab` (SamplingWorkspaceBytes bytes).
inline SamplingWorkspaceView SamplingWorkspaceAt(void* base, int rows, int vocab) {
  const size_t per_chunk = size_t(rows) * SamplingChunkCount(vocab);
  const size_t per_candidate = size_t(rows) * kSamplingCandidates;
  auto* at = static_cast<char*>(base);
  auto take = [&](size_t bytes) {
    char* here = at;
    at += SamplingAlignUp(bytes);
    return here;
  };
  SamplingWorkspaceView view;
  view.stats = reinterpret_cast<SamplingChunkStats*>(take(per_chunk * sizeof(SamplingChunkStats)));
  view.sweep = reinterpret_cast<SamplingChunkSweep*>(take(per_chunk * sizeof(SamplingChunkSweep)));
  view.chunk_counts = reinterpret_cast<int32_t*>(take(per_chunk * sizeof(int32_t)));
  view.ids = reinterpret_cast<int32_t*>(take(per_candidate * sizeof(int32_t)));
  view.penalized = reinterpret_cast<float*>(take(per_candidate * sizeof(float)));
  view.raw = reinterpret_cast<float*>(take(per_candidate * sizeof(float)));
  view.paths = reinterpret_cast<int32_t*>(take(size_t(rows) * sizeof(int32_t)));
  return view;
}

// Bytes of the workspace for launches of up to `rows` rows at `vocab`.
inline size_t SamplingWorkspaceBytes(int rows, int vocab) {
  const size_t per_chunk = size_t(rows) * SamplingChunkCount(vocab);
  const size_t per_candidate = size_t(rows) * kSamplingCandidates;
  return SamplingAlignUp(per_chunk * sizeof(SamplingChunkStats)) +
         SamplingAlignUp(per_chunk * sizeof(SamplingChunkSweep)) +
         SamplingAlignUp(per_chunk * sizeof(int32_t)) + 3 * SamplingAlignUp(per_candidate * 4) +
         SamplingAlignUp(size_t(rows) * sizeof(int32_t));
}

}  // namespace tessera::cuda
