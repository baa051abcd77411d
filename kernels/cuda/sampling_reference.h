// CPU reference of the on-device sampler (sampling.cuh): the same semantics written the plain
// way, in f64 where it matters (weights, masses, the draw, log-softmax), with full sorts. For
// tests; O(vocab log vocab) per row.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "kernels/cuda/sampling_types.h"

namespace tessera::cuda::reference {

// One row's penalty entry (a row of the CSR lists in SamplingPenalties).
struct PenaltyEntry {
  int32_t token = 0;
  int32_t generated_count = 0;
  bool in_prompt = false;
};

struct SampledRow {
  int32_t token = 0;
  double logprob = 0.0;          // raw log_softmax(logits)[token]
  std::vector<int32_t> top_ids;  // num_logprobs best raw logits (ties: lower id)
  std::vector<double> top_logprobs;
  std::vector<double> probs;  // [vocab] the final sampling distribution (one-hot greedy)
  // How close each threshold decision came to flipping, relative to its scale (+inf when not
  // taken): top-p (running mass vs target, / top-k mass), min-p (the nearest kept-prefix weight
  // vs min_p, / min_p) and the draw (u * total vs the chosen token's CDF interval, / total). A
  // device result computed in f32 may differ from this reference only when a margin is tiny.
  double margin_top_p = 0.0;
  double margin_min_p = 0.0;
  double margin_draw = 0.0;
};

// The penalized logit (f32 arithmetic, as the CPU sampler and the kernel).
float PenalizedLogit(float logit, const PenaltyEntry& entry, const SamplingRowParams& params);

// Logits shaped like an LM head's, [rows, vocab]: N(-2, 2.5), and 16 ids per row lifted by 10
// (tests and the kernel bench).
inline std::vector<float> HeadLikeLogits(int rows, int vocab, std::mt19937& rng) {
  std::normal_distribution<float> tail(-2.0f, 2.5f);
  std::vector<float> logits(size_t(rows) * vocab);
  for (float& z : logits) z = tail(rng);
  for (int r = 0; r < rows; ++r) {
    for (int t = 0; t < 16; ++t) logits[size_t(r) * vocab + (rng() % vocab)] += 10.0f;
  }
  return logits;
}

// Samples one row given the uniform u in [0, 1). Preconditions: as LaunchSampling's for a row;
// penalty tokens distinct.
SampledRow SampleRow(std::span<const float> logits, const SamplingRowParams& params,
                     std::span<const PenaltyEntry> penalties, float u);

}  // namespace tessera::cuda::reference
