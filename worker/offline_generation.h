// Offline generation of one sequence on a ModelRunner: chunked prefill of the prompt, then one
// decode step per token, stopping at a stop id or max_tokens. It drives the runner as the worker
// does, on slot 0: BeginSequence, ModelRunner::Step per chunk and per decode (the runner samples,
// cpu with worker::Sampler), EndSequence — so its tokens are the served path's.
// The `tessera generate --model` path and the oracle/determinism tests use it; the served path
// (router + worker) schedules many sequences instead.
// Threading: runs on the caller's thread, which must be the runner's only caller meanwhile (and
// slot 0 of the runner must be free).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/sampling/sampling_params.h"
#include "worker/model_runner.h"

namespace tessera::worker {

struct GenerationRequest {
  std::vector<int32_t> prompt;             // >= 1 token
  int max_tokens = 64;                     // >= 1
  sampling::SamplingParams sampling;                 // temperature 0 = greedy
  std::vector<int32_t> stop_token_ids;     // e.g. EOS; the stop token is returned
  int prefill_chunk = 512;                 // tokens per prefill step, >= 1
  // Fill GenerationResult::first_logits: the final prompt chunk then goes through Forward (for
  // its logits) before the Step that samples from it, so that chunk is computed twice (the Step
  // rewrites the same K/V, bit-identical). For oracle tests; off for generation.
  bool return_first_logits = false;
};

enum class FinishReason { kLength, kStop };

struct GenerationResult {
  std::vector<int32_t> tokens;             // generated tokens
  std::vector<float> logprobs;             // raw logprob of each generated token
  std::vector<float> first_logits;         // logits after the prompt [vocab], when asked
  FinishReason finish_reason = FinishReason::kLength;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// INVALID_ARGUMENT for bad requests (empty prompt, prompt ids outside the vocabulary, bad sampling
// values, prompt + max_tokens past the context or the KV pool). `on_token` (may be empty) sees
// each token as it is sampled. Precondition: slot 0 of the runner is not started.
absl::StatusOr<GenerationResult> GenerateOffline(ModelRunner& runner,
                                                 const GenerationRequest& request,
                                                 const std::function<void(int32_t)>& on_token);

}  // namespace tessera::worker
