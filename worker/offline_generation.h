// Offline generation of one sequence on a ModelRunner: chunked prefill of the prompt, then one
// decode step per token, sampling with worker::Sampler, stopping at a stop id or max_tokens.
// The `tessera generate --model` path and the oracle/determinism tests use it; the served path
// (router + worker) schedules many sequences instead.
// Threading: runs on the caller's thread, which must be the runner's only caller meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model_runner.h"
#include "worker/sampler/sampling_params.h"

namespace tessera::worker {

struct GenerationRequest {
  std::vector<int32_t> prompt;             // >= 1 token
  int max_tokens = 64;                     // >= 1
  SamplingParams sampling;                 // temperature 0 = greedy
  std::vector<int32_t> stop_token_ids;     // e.g. EOS; the stop token is returned
  int prefill_chunk = 512;                 // tokens per prefill step, >= 1
};

enum class FinishReason { kLength, kStop };

struct GenerationResult {
  std::vector<int32_t> tokens;             // generated tokens
  std::vector<float> logprobs;             // raw logprob of each generated token
  std::vector<float> first_logits;         // logits after the prompt [vocab]
  FinishReason finish_reason = FinishReason::kLength;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// INVALID_ARGUMENT for bad requests (empty prompt, bad sampling values, prompt + max_tokens past
// the context or the KV pool). `on_token` (may be empty) sees each token as it is sampled.
absl::StatusOr<GenerationResult> GenerateOffline(ModelRunner& runner,
                                                 const GenerationRequest& request,
                                                 const std::function<void(int32_t)>& on_token);

}  // namespace tessera::worker
