#include "worker/sampler/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/util/check.h"
#include "kernels/cpu/softmax.h"

namespace tessera::worker {
namespace {

namespace kc = ::tessera::kernels::cpu;

// Block of weights summed together by the draw (it skips whole blocks, then walks one).
constexpr size_t kDrawBlock = 64;

// Σ w[0, n) in a fixed order: 8 lane sums, then the lanes in order.
float BlockSum(const float* w, size_t n) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += w[i + l];
  }
  for (; i < n; ++i) lanes[0] += w[i];
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}

// The first index whose weight's prefix sum exceeds u, or the last positive weight.
size_t WalkBlock(const float* w, size_t n, double u) {
  double cum = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < n; ++i) {
    if (w[i] <= 0.0f) continue;
    cum += w[i];
    last_positive = i;
    if (u < cum) return i;
  }
  return last_positive;
}

// "a ranks before b": larger value, then lower id.
bool Better(float value_a, int32_t a, float value_b, int32_t b) {
  return value_a > value_b || (value_a == value_b && a < b);
}

}  // namespace

void TopIds(std::span<const float> values, size_t k, std::vector<int32_t>* out) {
  out->clear();
  if (k == 0) return;
  // Min-heap (worst on top) of the k best so far. Ids arrive in increasing order, so a value
  // equal to the current worst never displaces it.
  auto worse_on_top = [&](int32_t a, int32_t b) { return Better(values[a], a, values[b], b); };
  const int32_t n = static_cast<int32_t>(values.size());
  int32_t i = 0;
  for (; i < n && out->size() < k; ++i) {
    out->push_back(i);
    std::push_heap(out->begin(), out->end(), worse_on_top);
  }
  float worst = out->size() == k ? values[out->front()] : 0.0f;
  for (; i < n; ++i) {
    if (!(values[i] > worst)) continue;  // the common case: one compare per element
    std::pop_heap(out->begin(), out->end(), worse_on_top);
    out->back() = i;
    std::push_heap(out->begin(), out->end(), worse_on_top);
    worst = values[out->front()];
  }
  std::sort_heap(out->begin(), out->end(), worse_on_top);  // best first
}

Sampler::Sampler(const sampling::SamplingParams& params, int vocab_size,
                 std::span<const int32_t> prompt_tokens)
    : params_(params), vocab_size_(vocab_size), rng_(params.seed) {
  TESSERA_CHECK(sampling::ValidateSamplingParams(params, vocab_size).ok(),
                "Sampler: sampling params must be validated first");
  for (int32_t token : prompt_tokens) {
    TESSERA_CHECK(token >= 0 && token < vocab_size, "Sampler: prompt token out of range");
  }
  if (params.repetition_penalty != 1.0f) {
    prompt_tokens_.assign(prompt_tokens.begin(), prompt_tokens.end());
    std::sort(prompt_tokens_.begin(), prompt_tokens_.end());
    prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()),
                         prompt_tokens_.end());
  }
  if (HasPenalties()) penalized_.resize(static_cast<size_t>(vocab_size));
}

bool Sampler::HasPenalties() const {
  return params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
         params_.frequency_penalty != 0.0f;
}

void Sampler::RecordGenerated(int32_t token) {
  TESSERA_CHECK(token >= 0 && token < vocab_size_, "Sampler: token out of range");
  ++generated_counts_[token];
}

void Sampler::RestoreGenerated(std::span<const int32_t> tokens) {
  for (int32_t token : tokens) RecordGenerated(token);
  // Sample draws exactly once per stochastic token (in Draw) and never when greedy.
  if (params_.temperature >= sampling::kGreedyTemperature) rng_.discard(tokens.size());
}

SampleResult Sampler::Sample(std::span<const float> logits) {
  TESSERA_CHECK(static_cast<int>(logits.size()) == vocab_size_,
                "Sampler: logits size differs from the vocab size");
  const float* z = ApplyPenalties(logits);
  SampleResult result;
  result.token =
      params_.temperature < sampling::kGreedyTemperature ? Greedy(z) : SampleStochastic(z);
  FillLogprobs(logits, &result);
  RecordGenerated(result.token);
  return result;
}

const float* Sampler::ApplyPenalties(std::span<const float> logits) {
  if (!HasPenalties()) return logits.data();
  std::copy(logits.begin(), logits.end(), penalized_.begin());
  const float r = params_.repetition_penalty;
  auto repeat = [&](int32_t token) {
    float& v = penalized_[token];
    v = v > 0.0f ? v / r : v * r;
  };
  if (r != 1.0f) {
    for (int32_t token : prompt_tokens_) repeat(token);
    for (const auto& [token, count] : generated_counts_) {
      if (!std::binary_search(prompt_tokens_.begin(), prompt_tokens_.end(), token)) {
        repeat(token);
      }
    }
  }
  for (const auto& [token, count] : generated_counts_) {
    penalized_[token] -= params_.frequency_penalty * static_cast<float>(count) +
                         params_.presence_penalty;
  }
  return penalized_.data();
}

int32_t Sampler::Greedy(const float* z) const {
  const float max = kc::RowMax({z, static_cast<size_t>(vocab_size_)});
  for (int32_t i = 0; i < vocab_size_; ++i) {
    if (z[i] == max) return i;  // the lowest id wins ties
  }
  return 0;  // NaN max (precondition broken): any valid id
}

int32_t Sampler::SampleStochastic(const float* z) {
  const std::span<const float> logits(z, static_cast<size_t>(vocab_size_));
  const float z_max = kc::RowMax(logits);
  if (!std::isfinite(z_max)) return Greedy(z);
  const float inv_t = 1.0f / params_.temperature;
  weights_.assign(logits.begin(), logits.end());
  kc::ScaleInPlace(weights_, inv_t);
  // The best token gets exactly exp(0) = 1.
  const float vocab_sum = kc::ExpShiftInPlace(weights_, z_max * inv_t);

  size_t count = static_cast<size_t>(vocab_size_);
  bool all_vocab = true;  // candidates_ not materialized: every id, in id order
  bool sorted = false;
  if (params_.top_k > 0 && params_.top_k < vocab_size_) {
    count = SelectTopK(z, static_cast<size_t>(params_.top_k));
    all_vocab = false;
    sorted = true;
  }
  if (params_.top_p < 1.0f) {
    double total = vocab_sum;  // mass top-p is relative to: the vocab, or what top-k kept
    if (all_vocab) {
      count = NucleusCandidates(vocab_sum);
      all_vocab = false;
    } else {
      total = 0.0;
      for (size_t i = 0; i < count; ++i) total += weights_[candidates_[i]];
    }
    count = ApplyTopP(z, count, sorted, total);
  }
  if (params_.min_p > 0.0f) {
    count = ApplyMinP(count, all_vocab);
    all_vocab = false;
  }
  return Draw(count, all_vocab);
}

size_t Sampler::SelectTopK(const float* z, size_t k) {
  TopIds({z, static_cast<size_t>(vocab_size_)}, k, &candidates_);
  return k;
}

// Candidates for top-p over the whole vocab: drops the lightest tokens while their total mass
// stays below (1 - top_p) of the vocab's. Weights are bucketed by binary exponent (they lie in
// (0, 1]); whole buckets are dropped from the bottom, so every kept token outweighs every dropped
// one and the kept tokens hold more than top_p of the mass: the nucleus (the best-first prefix
// reaching top_p) lies inside them and is unchanged. Typical logits keep a few hundred tokens.
size_t Sampler::NucleusCandidates(float vocab_sum) {
  constexpr int kBuckets = 128;  // biased f32 exponents of values <= 1
  double mass[kBuckets] = {};
  for (int32_t i = 0; i < vocab_size_; ++i) {
    const uint32_t exponent = std::bit_cast<uint32_t>(weights_[i]) >> 23;  // sign bit is 0
    if (exponent < kBuckets) mass[exponent] += weights_[i];
  }
  const double budget = (1.0 - params_.top_p) * static_cast<double>(vocab_sum);
  double dropped = 0.0;
  uint32_t keep_from = 0;  // keep weights whose biased exponent is >= keep_from
  while (keep_from < kBuckets && dropped + mass[keep_from] < budget) {
    dropped += mass[keep_from++];
  }
  candidates_.clear();
  for (int32_t i = 0; i < vocab_size_; ++i) {
    if ((std::bit_cast<uint32_t>(weights_[i]) >> 23) >= keep_from) candidates_.push_back(i);
  }
  return candidates_.size();
}

// Keeps the best-first prefix of candidates_[0, count) whose mass first reaches top_p of the
// total. Unsorted candidates are ordered progressively (64, 256, 1024, ... at a time).
size_t Sampler::ApplyTopP(const float* z, size_t count, bool sorted, double total) {
  const double target = static_cast<double>(params_.top_p) * total;
  auto better = [z](int32_t a, int32_t b) { return Better(z[a], a, z[b], b); };
  const auto first = candidates_.begin();
  double cum = 0.0;
  size_t done = 0;
  for (size_t chunk = 64; done < count; chunk *= 4) {
    const size_t end = std::min(count, done + chunk);
    if (!sorted) {
      if (end < count) std::nth_element(first + done, first + end, first + count, better);
      std::sort(first + done, first + end, better);
    }
    for (size_t i = done; i < end; ++i) {
      cum += weights_[candidates_[i]];
      if (cum >= target) return i + 1;
    }
    done = end;
  }
  return count;
}

// Drops candidates with weight < min_p (the best token's weight is exactly 1), keeping order.
size_t Sampler::ApplyMinP(size_t count, bool all_vocab) {
  const float threshold = params_.min_p;
  if (all_vocab) {
    candidates_.clear();
    for (int32_t i = 0; i < vocab_size_; ++i) {
      if (weights_[i] >= threshold) candidates_.push_back(i);
    }
    return candidates_.size();
  }
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (weights_[candidates_[i]] >= threshold) candidates_[kept++] = candidates_[i];
  }
  return kept;
}

int32_t Sampler::Draw(size_t count, bool all_vocab) {
  const double u01 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // [0, 1)
  if (!all_vocab) {
    double total = 0.0;
    for (size_t i = 0; i < count; ++i) total += weights_[candidates_[i]];
    const double u = u01 * total;
    double cum = 0.0;
    for (size_t i = 0; i < count; ++i) {
      cum += weights_[candidates_[i]];
      if (u < cum) return candidates_[i];
    }
    return candidates_[count - 1];
  }
  // Whole vocab in id order: skip blocks by their sums, then walk one block.
  const size_t n = weights_.size();
  double total = 0.0;
  for (size_t b = 0; b < n; b += kDrawBlock) {
    total += BlockSum(&weights_[b], std::min(kDrawBlock, n - b));
  }
  const double u = u01 * total;
  double cum = 0.0;
  size_t last_positive_block = 0;
  for (size_t b = 0; b < n; b += kDrawBlock) {
    const size_t len = std::min(kDrawBlock, n - b);
    const double block = BlockSum(&weights_[b], len);
    if (block > 0.0) last_positive_block = b;
    if (u < cum + block) return static_cast<int32_t>(b + WalkBlock(&weights_[b], len, u - cum));
    cum += block;
  }
  // Rounding put u at the very end: the last token with a positive weight.
  const size_t b = last_positive_block;
  const size_t len = std::min(kDrawBlock, n - b);
  return static_cast<int32_t>(b + WalkBlock(&weights_[b], len, INFINITY));
}

void Sampler::FillLogprobs(std::span<const float> logits, SampleResult* result) const {
  const float lse = kc::LogSumExp(logits);
  result->logprob = logits[result->token] - lse;
  const int n = params_.num_logprobs;
  if (n == 0) return;
  std::vector<int32_t> ids;
  TopIds(logits, static_cast<size_t>(n), &ids);
  std::vector<TokenLogprob>& top = result->top_logprobs;
  top.reserve(ids.size());
  for (int32_t id : ids) top.push_back({id, logits[id]});
  for (TokenLogprob& t : top) t.logprob -= lse;
}

}  // namespace tessera::worker
