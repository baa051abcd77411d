// Per-request sampling parameters (they arrive as request fields, so validation messages are
// user-facing) and their validation.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace tessera::sampling {

inline constexpr int kMaxLogprobs = 20;
// Temperatures below this are treated as greedy (as vLLM does): dividing logits by a tiny
// temperature only overflows to the same argmax.
inline constexpr float kGreedyTemperature = 1e-5f;

inline constexpr float kMaxLogitBias = 100.0f;
inline constexpr int kMaxLogitBiasTokens = 1024;  // logit_bias entries per request

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax, lowest id on ties); >= 0
  int top_k = 0;                    // keep the k most likely tokens; 0 = off; >= vocab = off
  float top_p = 1.0f;               // nucleus mass in (0, 1]; 1 = off
  float min_p = 0.0f;               // drop tokens with p < min_p * p_max; in [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off; over prompt + generated tokens
  float presence_penalty = 0.0f;    // in [-2, 2]; over generated tokens
  float frequency_penalty = 0.0f;   // in [-2, 2]; over generated tokens
  uint64_t seed = 0;                // seeds the sequence's own RNG
  int num_logprobs = 0;             // top-N logprobs to return, in [0, min(20, vocab)]
  // OpenAI's logit_bias: logits[logit_bias_tokens[k]] += logit_bias_values[k] before sampling,
  // like the structured-output mask (so logprobs include it; kernels/cpu/logit_adjust.h). Token
  // ids ascending and distinct; biases finite in [-kMaxLogitBias, kMaxLogitBias].
  std::vector<int32_t> logit_bias_tokens = {};
  std::vector<float> logit_bias_values = {};
};

// OK, or INVALID_ARGUMENT naming the first bad field, its allowed range and the value given,
// e.g. "top_p must be in (0, 1], got 1.5". NaN and infinities are rejected everywhere.
absl::Status ValidateSamplingParams(const SamplingParams& params, int vocab_size);

}  // namespace tessera::sampling
