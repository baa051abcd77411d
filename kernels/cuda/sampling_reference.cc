#include "kernels/cuda/sampling_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tessera::cuda::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Ids in best-first order: larger value, then lower id.
std::vector<int32_t> BestFirst(const std::vector<float>& values) {
  std::vector<int32_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return values[a] > values[b]; });
  return order;
}

int32_t ArgMax(const std::vector<float>& z) {
  int32_t best = 0;
  for (size_t i = 1; i < z.size(); ++i) {
    if (z[i] > z[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

void FillLogprobs(std::span<const float> logits, int n, SampledRow* out) {
  double max = -kInf;
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double lse = max + std::log(sum);
  out->logprob = logits[out->token] - lse;
  const std::vector<int32_t> order = BestFirst({logits.begin(), logits.end()});
  for (int r = 0; r < n; ++r) {
    out->top_ids.push_back(order[r]);
    out->top_logprobs.push_back(logits[order[r]] - lse);
  }
}

// Length of the best-first prefix kept by top-k and top-p; updates *margin for top-p.
size_t KeptPrefix(const std::vector<int32_t>& order, const std::vector<double>& w,
                  const SamplingRowParams& p, double* margin) {
  const size_t vocab = order.size();
  size_t kept = vocab;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) kept = static_cast<size_t>(p.top_k);
  if (p.top_p < 1.0f) {
    double mass = 0.0;
    for (size_t r = 0; r < kept; ++r) mass += w[order[r]];
    const double target = static_cast<double>(p.top_p) * mass;
    double cum = 0.0;
    for (size_t r = 0; r < kept; ++r) {
      const double before = cum;
      cum += w[order[r]];
      if (cum >= target) {
        *margin = std::min(*margin, std::min(cum - target, target - before) / mass);
        kept = r + 1;
        break;
      }
    }
  }
  return kept;
}

}  // namespace

float PenalizedLogit(float logit, const PenaltyEntry& entry, const SamplingRowParams& params) {
  float z = logit;
  const float r = params.repetition_penalty;
  if (r != 1.0f && (entry.in_prompt || entry.generated_count > 0)) z = z > 0.0f ? z / r : z * r;
  if (entry.generated_count > 0) {
    z -= params.frequency_penalty * static_cast<float>(entry.generated_count) +
         params.presence_penalty;
  }
  return z;
}

SampledRow SampleRow(std::span<const float> logits, const SamplingRowParams& params,
                     std::span<const PenaltyEntry> penalties, float u) {
  const size_t vocab = logits.size();
  std::vector<float> z(logits.begin(), logits.end());
  for (const PenaltyEntry& e : penalties) z[e.token] = PenalizedLogit(logits[e.token], e, params);
  SampledRow out;
  out.probs.assign(vocab, 0.0);
  out.margin_top_p = out.margin_min_p = out.margin_draw = kInf;
  const double z_max = z[ArgMax(z)];
  if (params.temperature < kSamplingGreedyTemperature || z_max == -kInf) {
    out.token = ArgMax(z);
    out.probs[out.token] = 1.0;
  } else {
    std::vector<double> w(vocab);
    for (size_t i = 0; i < vocab; ++i) w[i] = std::exp((z[i] - z_max) / params.temperature);
    const std::vector<int32_t> order = BestFirst(z);
    const size_t prefix = KeptPrefix(order, w, params, &out.margin_top_p);
    std::vector<bool> kept(vocab, false);
    for (size_t r = 0; r < prefix; ++r) {
      const int32_t id = order[r];
      if (params.min_p > 0.0f) {
        out.margin_min_p =
            std::min(out.margin_min_p, std::fabs(w[id] - params.min_p) / params.min_p);
        if (w[id] < params.min_p) continue;
      }
      kept[id] = true;
    }
    double total = 0.0;
    for (size_t i = 0; i < vocab; ++i) total += kept[i] ? w[i] : 0.0;
    const double target = static_cast<double>(u) * total;
    double cum = 0.0;
    out.token = -1;
    for (size_t i = 0; i < vocab && out.token < 0; ++i) {
      if (!kept[i] || w[i] <= 0.0) continue;
      const double before = cum;
      cum += w[i];
      if (target < cum) {
        out.token = static_cast<int32_t>(i);
        out.margin_draw = std::min(target - before, cum - target) / total;
      }
    }
    if (out.token < 0) {  // rounding put the target at the very end: the last kept token
      for (size_t i = 0; i < vocab; ++i) {
        if (kept[i] && w[i] > 0.0) out.token = static_cast<int32_t>(i);
      }
    }
    for (size_t i = 0; i < vocab; ++i) out.probs[i] = kept[i] ? w[i] / total : 0.0;
  }
  FillLogprobs(logits, params.num_logprobs, &out);
  return out;
}

}  // namespace tessera::cuda::reference
