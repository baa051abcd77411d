// The inputs and outputs of the on-device sampler (sampling.cuh), plain C++ so the CPU reference
// (sampling_reference.h) and the worker share them with the kernel. Semantics follow the CPU
// sampler (worker/sampler/sampler.h); see sampling.cuh for the algorithm.
#pragma once

#include <cstdint>

namespace tessera::cuda {

// Rows may ask for up to this many top logprobs (worker::kMaxLogprobs).
inline constexpr int kSamplingMaxLogprobs = 20;
// Temperatures below this sample greedily (worker::kGreedyTemperature).
inline constexpr float kSamplingGreedyTemperature = 1e-5f;

// One row's request state, validated by the worker (worker::ValidateSamplingParams).
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

}  // namespace tessera::cuda
