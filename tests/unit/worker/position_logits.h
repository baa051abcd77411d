// Logits of two runners over the positions of one prompt, compared: the mean KL divergence and
// the largest logit / logprob differences (what the margin rule's bounds are set from). Shared by
// the cuda runner tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "worker/model_runner.h"

namespace tessera::worker::testing {

// Next-token logits at every position of one prompt, fed one token per step (slot 0, blocks
// 1 .. num_blocks - 1).
inline std::vector<std::vector<float>> PositionLogits(ModelRunner& runner,
                                                      const std::vector<int32_t>& prompt,
                                                      int num_blocks) {
  std::vector<int32_t> table(num_blocks - 1);
  std::iota(table.begin(), table.end(), 1);
  std::vector<std::vector<float>> out;
  StepLogits logits;
  for (size_t p = 0; p < prompt.size(); ++p) {
    const std::vector<int32_t> token = {prompt[p]};
    const SequenceWork work{.tokens = token, .start_pos = static_cast<int>(p),
                            .block_table = table, .needs_logits = true, .slot = 0};
    EXPECT_TRUE(runner.Forward({&work, 1}, &logits).ok());
    out.emplace_back(logits.values.begin(), logits.values.end());
  }
  return out;
}

inline std::vector<double> LogSoftmax(const std::vector<float>& z) {
  const double m = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (float v : z) sum += std::exp(v - m);
  std::vector<double> out(z.size());
  for (size_t i = 0; i < z.size(); ++i) out[i] = z[i] - m - std::log(sum);
  return out;
}

inline double MeanKl(const std::vector<std::vector<float>>& p_logits,
              const std::vector<std::vector<float>>& q_logits) {
  double total = 0;
  for (size_t r = 0; r < p_logits.size(); ++r) {
    const std::vector<double> lp = LogSoftmax(p_logits[r]), lq = LogSoftmax(q_logits[r]);
    for (size_t i = 0; i < lp.size(); ++i) total += std::exp(lp[i]) * (lp[i] - lq[i]);
  }
  return total / static_cast<double>(p_logits.size());
}

// Every logit multiplied by `factor`: what scaling the final hidden state by it (a corruption of
// that size) does to the logits, since the head is linear.
inline std::vector<std::vector<float>> ScaledLogits(std::vector<std::vector<float>> logits,
                                                    float factor) {
  for (std::vector<float>& row : logits) {
    for (float& v : row) v *= factor;
  }
  return logits;
}

// The largest |logit| and |logprob| differences over every position and vocabulary entry, and
// the reference's smallest top-2 margin: what the margin rule's bounds are set from.
struct LogitDiffs {
  double logit = 0, logprob = 0, min_margin = 1e30;
};
inline LogitDiffs MaxDiffs(const std::vector<std::vector<float>>& reference,
                    const std::vector<std::vector<float>>& got) {
  LogitDiffs d;
  for (size_t r = 0; r < reference.size(); ++r) {
    const std::vector<double> lp = LogSoftmax(reference[r]), lq = LogSoftmax(got[r]);
    std::vector<double> sorted = lp;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    d.min_margin = std::min(d.min_margin, sorted[0] - sorted[1]);
    for (size_t i = 0; i < lp.size(); ++i) {
      d.logit = std::max(d.logit, double(std::abs(reference[r][i] - got[r][i])));
      d.logprob = std::max(d.logprob, std::abs(lp[i] - lq[i]));
    }
  }
  return d;
}

}  // namespace tessera::worker::testing
