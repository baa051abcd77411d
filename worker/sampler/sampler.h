// Per-sequence token sampler: penalties, temperature, top-k, top-p, min-p, then a seeded draw.
//
// Transform order (vLLM's): penalties -> temperature -> top-k -> top-p -> min-p -> sample.
//  - repetition_penalty r (over prompt + generated tokens, as vLLM): a positive logit is divided
//    by r, a negative one multiplied by r;
//  - frequency_penalty f / presence_penalty p (over generated tokens only, OpenAI/vLLM):
//    logit -= f * count(token) + p * (count(token) > 0);
//  - temperature T: weights w_i = exp(z_i / T - z_max / T) (so the best token has weight 1);
//    T < kGreedyTemperature (including 0) is greedy: argmax of the penalized logits, lowest id
//    on ties, no RNG draw (so the seed does not matter);
//  - top-k keeps the k largest logits (ties: lower id); top-p then keeps the smallest
//    highest-first prefix whose mass (renormalized over what top-k kept) reaches top_p — the token
//    that crosses the threshold is kept; min-p then drops tokens with w_i < min_p * w_max;
//  - the draw: u ~ U[0, 1) from the sequence's std::mt19937_64 (seeded with params.seed; one
//    64-bit draw per sampled token), the token where the cumulative weight first exceeds u * Σw,
//    walking candidates best-first when top-k/top-p sorted them, else in id order.
// Logprobs (chosen token and top-N) are those of the RAW model distribution, log_softmax of the
// logits as given — before penalties, temperature and filtering — like vLLM's default
// ("raw_logprobs"), so they do not depend on the sampling parameters.
// Cost for vocab 49152: O(V) passes (no full sort); top-p sorts only the prefix it needs.
//
// Threading: a Sampler belongs to one sequence and is used by one thread at a time (the worker's
// step thread). Not thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/sampling/sampling_params.h"

namespace tessera::worker {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;                    // raw log_softmax(logits)[token]
  std::vector<TokenLogprob> top_logprobs;  // num_logprobs best, logprob desc (ties: lower id)
};

// The k best ids of `values` (larger value first, lower id first on ties), best first, into out.
// O(V log k). Exposed for tests and benchmarks.
void TopIds(std::span<const float> values, size_t k, std::vector<int32_t>* out);

class Sampler {
 public:
  // Preconditions: ValidateSamplingParams(params, vocab_size) is OK; every prompt token is in
  // [0, vocab_size) (the worker validates requests before creating samplers).
  Sampler(const sampling::SamplingParams& params, int vocab_size,
          std::span<const int32_t> prompt_tokens);

  // Samples the next token from logits [vocab_size] and records it as generated (it counts for
  // the penalties of the following calls). Precondition: logits.size() == vocab_size; logits
  // are finite or -inf. If no logit is finite, returns token 0.
  SampleResult Sample(std::span<const float> logits);

  // Records a generated token without sampling (e.g. rebuilding state after a preemption).
  // Precondition: 0 <= token < vocab_size.
  void RecordGenerated(int32_t token);

  // Rebuilds the state of a sequence re-admitted after a preemption: records `tokens` as
  // generated (in order) and advances the RNG by the draws sampling them took — one 64-bit draw
  // per token when sampling is stochastic, none when greedy — so the next Sample continues
  // exactly as an uninterrupted sampler would. (The one case it cannot replay: a stochastic
  // sample whose logits had no finite value fell back to greedy without a draw; real models never
  // produce such rows.) Precondition: every token is in [0, vocab_size).
  void RestoreGenerated(std::span<const int32_t> tokens);

  const sampling::SamplingParams& params() const { return params_; }

 private:
  bool HasPenalties() const;
  // Phases of Sample, in order.
  const float* ApplyPenalties(std::span<const float> logits);
  int32_t Greedy(const float* z) const;
  int32_t SampleStochastic(const float* z);
  size_t SelectTopK(const float* z, size_t k);
  size_t NucleusCandidates(float vocab_sum);
  size_t ApplyTopP(const float* z, size_t count, bool sorted, double total);
  size_t ApplyMinP(size_t count, bool all_vocab);
  int32_t Draw(size_t count, bool all_vocab);
  void FillLogprobs(std::span<const float> logits, SampleResult* result) const;

  sampling::SamplingParams params_;
  int vocab_size_;
  std::mt19937_64 rng_;
  std::vector<int32_t> prompt_tokens_;  // distinct, sorted
  absl::flat_hash_map<int32_t, int32_t> generated_counts_;
  std::vector<float> penalized_;      // [vocab] penalized logits (when penalties are on)
  std::vector<float> weights_;        // [vocab] exp(z / T - z_max / T)
  std::vector<int32_t> candidates_;   // token ids still in play
};

}  // namespace tessera::worker
