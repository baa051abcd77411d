// Comparing a greedy run of the cuda backend with the cpu backend's run of the same request when
// exact equality is not guaranteed: on a real GPU cuBLAS sums in another order than the cpu
// backend, and bf16 rounds differently from f32, so two near-tied candidates may swap.
//
// The rule, position by position while both runs have produced the same tokens so far:
//   - the candidate's token must equal the reference's wherever the reference's top-2 margin
//     (top-1 minus top-2 logprob, which equals the logit margin) exceeds `margin`;
//   - where the margin is at most `margin` the candidate may pick another token, but only one the
//     reference ranks within `margin` of its top-1; the runs then diverge and nothing after that
//     position is compared (they continue from different prefixes);
//   - at every compared position the chosen token's logprob agrees within `logprob`.
// A logprob error of at most e per token moves a margin by at most 2e, so `margin` is set to
// twice `logprob`.
//
// Used by the cuda runner test (tests/unit/worker) and the cuda worker e2e test (tests/e2e).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessera::testing_util {

// One generated position of a greedy run.
struct GreedyToken {
  int32_t token_id = 0;
  float logprob = 0;  // the chosen token's log-probability under the raw distribution
  // The most likely tokens at this position, most likely first; the reference run needs at
  // least two (its top-2 margin), the candidate's are not read.
  std::vector<std::pair<int32_t, float>> top{};
};

struct GreedyTolerance {
  float logprob = 0;  // |candidate - reference| logprob of the same token at the same position
  float margin = 0;   // top-2 margin up to which the runs may choose differently
};

// The bounds for a cuda run against the cpu backend (f32) on the tiny test models (2 layers,
// hidden 128, head_dim 64). Measured on the emulated device (tests/README.md, "cuda against cpu",
// has the numbers and where they come from):
//   f32:  max |dlogprob| 9.5e-7 (chosen tokens), 7.1e-7 (every vocabulary entry): the emulated
//         GEMM and the cpu kernels sum in different orders, as cuBLAS will. Bound 1e-5, ten times
//         the measurement: a GPU adds its own order, FMA contraction and fast exp/log.
//   bf16: max |dlogprob| 0.0044 (chosen tokens, both test models), 0.0069 (every vocabulary
//         entry): bf16 rounding of weights, activations and KV. Bound 0.03, four times the
//         largest: cuBLAS's f32 sums rounded to bf16 may land one bf16 step away from the
//         emulated device's, the same size of error again.
inline constexpr GreedyTolerance kCudaF32Tolerance{.logprob = 1e-5f, .margin = 2e-5f};
inline constexpr GreedyTolerance kCudaBf16Tolerance{.logprob = 0.03f, .margin = 0.06f};

struct GreedyComparison {
  std::string mismatch;        // the first violation of the rule; "" when there is none
  int compared = 0;            // positions compared
  int diverged_at = -1;        // first position with different tokens (allowed there), or -1
  float max_logprob_diff = 0;  // over the compared positions with equal tokens
  float min_margin = 0;        // the reference's smallest top-2 margin over compared positions
};

GreedyComparison CompareGreedyRuns(std::span<const GreedyToken> reference,
                                   std::span<const GreedyToken> candidate,
                                   const GreedyTolerance& tolerance);

}  // namespace tessera::testing_util
