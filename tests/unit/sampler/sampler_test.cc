#include "worker/sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/sampling/sampling_params.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

sampling::SamplingParams Params(float temperature, uint64_t seed = 1) {
  sampling::SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

std::vector<double> Softmax(const std::vector<float>& logits, double temperature) {
  double max = -INFINITY;
  for (float v : logits) max = std::max(max, double{v});
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    sum += p[i] = std::exp((logits[i] - max) / temperature);
  }
  for (double& v : p) v /= sum;
  return p;
}

// Counts of each token over `draws` samples with a fresh sampler (penalties off, so the
// distribution does not drift).
std::map<int32_t, int> Histogram(const sampling::SamplingParams& params,
                                 const std::vector<float>& logits, int draws) {
  Sampler sampler(params, static_cast<int>(logits.size()), {});
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[sampler.Sample(logits).token];
  return counts;
}

TEST(SamplerTest, GreedyPicksArgmaxLowestIdOnTiesAndIgnoresSeed) {
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  for (uint64_t seed : {1, 2, 99}) {
    Sampler sampler(Params(0.0f, seed), 5, {});
    for (int i = 0; i < 10; ++i) EXPECT_EQ(sampler.Sample(logits).token, 1);
  }
  // Tiny temperatures are greedy too.
  Sampler tiny(Params(1e-7f), 5, {});
  EXPECT_EQ(tiny.Sample(logits).token, 1);
}

TEST(SamplerTest, TopKOnlyReturnsTheKBest) {
  const std::vector<float> logits = {1.0f, 0.2f, 0.9f, 0.1f, 0.95f, 0.0f};
  sampling::SamplingParams p = Params(5.0f);  // hot: without top-k every token would appear
  p.top_k = 2;
  const auto counts = Histogram(p, logits, 1000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts.at(0), 0);
  EXPECT_GT(counts.at(4), 0);
}

TEST(SamplerTest, TopKTiesBreakTowardLowerIds) {
  const std::vector<float> logits = {0.0f, 1.0f, 1.0f, 1.0f};
  sampling::SamplingParams p = Params(1.0f);
  p.top_k = 2;
  const auto counts = Histogram(p, logits, 500);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(1) && counts.count(2));
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingTheMass) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (T = 1).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.125f),
                                     std::log(0.125f)};
  sampling::SamplingParams p = Params(1.0f);
  p.top_p = 0.5f;  // token 0 alone reaches 0.5
  EXPECT_EQ(Histogram(p, logits, 500).size(), 1u);
  p.top_p = 0.6f;  // token 1 crosses the threshold and is kept
  const auto counts = Histogram(p, logits, 1000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(0) && counts.count(1));
  EXPECT_NEAR(counts.at(0) / 1000.0, 2.0 / 3.0, 0.06);  // renormalized 0.5 : 0.25
}

TEST(SamplerTest, TopPOnLargeVocabSortsOnlyWhatItNeeds) {
  std::vector<float> logits(49152, 0.0f);
  for (int i = 0; i < 300; ++i) logits[(i * 163) % 49152] = 10.0f;  // 300 hot tokens
  sampling::SamplingParams p = Params(1.0f);
  p.top_p = 0.9f;
  std::set<int32_t> hot;
  for (int i = 0; i < 300; ++i) hot.insert((i * 163) % 49152);
  for (const auto& [token, count] : Histogram(p, logits, 2000)) EXPECT_TRUE(hot.count(token));
}

TEST(SamplerTest, MinPDropsUnlikelyTokens) {
  // Probabilities relative to the best: 1, 0.5, 0.09, 0.05.
  const std::vector<float> logits = {0.0f, std::log(0.5f), std::log(0.09f), std::log(0.05f)};
  sampling::SamplingParams p = Params(1.0f);
  p.min_p = 0.1f;
  const auto counts = Histogram(p, logits, 2000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(0) && counts.count(1));
}

TEST(SamplerTest, FiltersComposeInOrder) {
  // top_k = 3 keeps {0, 1, 2}; top_p = 0.7 of {0.5, 0.3, 0.2}/1.0 keeps {0, 1};
  // min_p = 0.7 then drops 1 (0.3 / 0.5 = 0.6 < 0.7).
  const std::vector<float> logits = {std::log(0.45f), std::log(0.27f), std::log(0.18f),
                                     std::log(0.1f)};
  sampling::SamplingParams p = Params(1.0f);
  p.top_k = 3;
  p.top_p = 0.7f;
  p.min_p = 0.7f;
  const auto counts = Histogram(p, logits, 300);
  EXPECT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 0);
}

TEST(SamplerTest, MaskedTokensAreNeverSampled) {
  const std::vector<float> logits = {-kInf, 0.0f, -kInf, 0.0f, -kInf};
  const auto counts = Histogram(Params(2.0f), logits, 1000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(1) && counts.count(3));
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedsDiffer) {
  std::vector<float> logits(1000);
  for (int i = 0; i < 1000; ++i) logits[i] = static_cast<float>((i * 37) % 101) / 25.0f;
  auto run = [&](uint64_t seed) {
    Sampler sampler(Params(1.0f, seed), 1000, {});
    std::vector<int32_t> tokens;
    for (int i = 0; i < 200; ++i) tokens.push_back(sampler.Sample(logits).token);
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

// 20000 draws against softmax(logits / T): chi-square with 7 degrees of freedom stays under the
// 0.999 quantile (24.32). The seed is fixed, so the test is deterministic.
TEST(SamplerTest, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f, -1.0f, 0.25f};
  for (float temperature : {0.7f, 1.0f, 1.8f}) {
    const int draws = 20000;
    const auto counts = Histogram(Params(temperature, 7), logits, draws);
    const auto probs = Softmax(logits, temperature);
    double chi2 = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      const double expected = probs[i] * draws;
      const double observed = counts.count(i) ? counts.at(i) : 0;
      chi2 += (observed - expected) * (observed - expected) / expected;
    }
    EXPECT_LT(chi2, 24.32) << "temperature " << temperature;
  }
}

TEST(SamplerTest, LogprobsAreRawLogSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, 3.0f, -2.0f, 3.0f, 0.0f};
  sampling::SamplingParams p = Params(0.5f);
  p.num_logprobs = 3;
  p.repetition_penalty = 1.3f;  // logprobs ignore penalties and temperature
  Sampler sampler(p, 6, std::vector<int32_t>{2});
  const SampleResult r = sampler.Sample(logits);
  double lse = 0;
  for (float v : logits) lse += std::exp(double{v});
  lse = std::log(lse);
  EXPECT_NEAR(r.logprob, logits[r.token] - lse, 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[0].token, 2);  // tie with 4: lower id first
  EXPECT_EQ(r.top_logprobs[1].token, 4);
  EXPECT_EQ(r.top_logprobs[2].token, 0);
  for (const TokenLogprob& t : r.top_logprobs) EXPECT_NEAR(t.logprob, logits[t.token] - lse, 1e-5);
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  // Token 0 (prompt, 2.0 -> 1.0) and token 1 (prompt, -0.5 -> -1.0) fall below token 2 (1.5).
  const std::vector<float> logits = {2.0f, -0.5f, 1.5f, -0.9f};
  sampling::SamplingParams p = Params(0.0f);
  p.repetition_penalty = 2.0f;
  Sampler sampler(p, 4, std::vector<int32_t>{0, 1, 0});
  EXPECT_EQ(sampler.Sample(logits).token, 2);
  // Now 2 is generated too (1.5 -> 0.75); -0.9 (token 3, unseen) is still lower, so 0 (1.0) wins.
  EXPECT_EQ(sampler.Sample(logits).token, 0);
}

TEST(SamplerTest, PresenceAndFrequencyPenaltiesUseGeneratedCounts) {
  const std::vector<float> logits = {1.0f, 0.7f, 0.0f};
  sampling::SamplingParams p = Params(0.0f);
  p.frequency_penalty = 0.2f;
  Sampler sampler(p, 3, std::vector<int32_t>{1});  // prompt tokens are not penalized
  EXPECT_EQ(sampler.Sample(logits).token, 0);      // 1.0
  EXPECT_EQ(sampler.Sample(logits).token, 0);      // 0.8 > 0.7
  EXPECT_EQ(sampler.Sample(logits).token, 1);      // 0.6 < 0.7
  sampling::SamplingParams q = Params(0.0f);
  q.presence_penalty = 0.5f;  // once per seen token
  Sampler presence(q, 3, {});
  EXPECT_EQ(presence.Sample(logits).token, 0);
  EXPECT_EQ(presence.Sample(logits).token, 1);  // 0.5 < 0.7
  EXPECT_EQ(presence.Sample(logits).token, 0);  // 0.5 vs 0.2: presence does not grow
}

TEST(SamplerTest, RecordGeneratedCountsForPenalties) {
  const std::vector<float> logits = {1.0f, 0.9f};
  sampling::SamplingParams p = Params(0.0f);
  p.presence_penalty = 0.5f;
  Sampler sampler(p, 2, {});
  sampler.RecordGenerated(0);
  EXPECT_EQ(sampler.Sample(logits).token, 1);
}

TEST(SamplerTest, LargeVocabFullDistributionStaysInRange) {
  std::vector<float> logits(49152);
  for (int i = 0; i < 49152; ++i) logits[i] = std::sin(i * 0.01f) * 4.0f;
  Sampler sampler(Params(1.0f, 3), 49152, {});
  for (int i = 0; i < 200; ++i) {
    const SampleResult r = sampler.Sample(logits);
    ASSERT_GE(r.token, 0);
    ASSERT_LT(r.token, 49152);
    ASSERT_LE(r.logprob, 0.0f);
  }
}

TEST(TopIdsTest, MatchesStableSortWithTies) {
  std::vector<float> values(997);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919) % 10);
  std::vector<int32_t> all(values.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  std::stable_sort(all.begin(), all.end(),
                   [&](int32_t a, int32_t b) { return values[a] > values[b]; });
  for (size_t k : {size_t{0}, size_t{1}, size_t{5}, size_t{50}, values.size()}) {
    std::vector<int32_t> top;
    TopIds(values, k, &top);
    EXPECT_EQ(top, std::vector<int32_t>(all.begin(), all.begin() + k)) << "k=" << k;
  }
}

struct InvalidCase {
  std::string name;
  sampling::SamplingParams params;
  std::string message;
};

TEST(ValidateSamplingParamsTest, AcceptsDefaultsAndEdges) {
  EXPECT_TRUE(sampling::ValidateSamplingParams(sampling::SamplingParams{}, 49152).ok());
  sampling::SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 100000;  // larger than the vocab: off
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 0.5f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.num_logprobs = 20;
  EXPECT_TRUE(sampling::ValidateSamplingParams(p, 49152).ok());
}

TEST(ValidateSamplingParamsTest, RejectsEachBadFieldByName) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<InvalidCase> cases;
  auto add = [&](std::string name, auto mutate, std::string message) {
    sampling::SamplingParams p;
    mutate(p);
    cases.push_back({std::move(name), p, std::move(message)});
  };
  add("negative temperature", [](auto& p) { p.temperature = -0.1f; },
      "temperature must be a finite number >= 0 (0 = greedy), got -0.1");
  add("nan temperature", [&](auto& p) { p.temperature = nan; }, "temperature must be");
  add("inf temperature", [](auto& p) { p.temperature = kInf; }, "temperature must be");
  add("negative top_k", [](auto& p) { p.top_k = -1; },
      "top_k must be >= 0 (0 disables it), got -1");
  add("top_p above 1", [](auto& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5");
  add("top_p zero", [](auto& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1], got 0");
  add("nan top_p", [&](auto& p) { p.top_p = nan; }, "top_p must be in (0, 1], got nan");
  add("negative min_p", [](auto& p) { p.min_p = -0.5f; }, "min_p must be in [0, 1], got -0.5");
  add("min_p above 1", [](auto& p) { p.min_p = 1.01f; }, "min_p must be in [0, 1]");
  add("zero repetition_penalty", [](auto& p) { p.repetition_penalty = 0.0f; },
      "repetition_penalty must be a finite number > 0 (1 disables it), got 0");
  add("inf repetition_penalty", [](auto& p) { p.repetition_penalty = kInf; },
      "repetition_penalty must be");
  add("presence_penalty", [](auto& p) { p.presence_penalty = 2.5f; },
      "presence_penalty must be in [-2, 2], got 2.5");
  add("nan presence_penalty", [&](auto& p) { p.presence_penalty = nan; }, "presence_penalty");
  add("frequency_penalty", [](auto& p) { p.frequency_penalty = -3.0f; },
      "frequency_penalty must be in [-2, 2], got -3");
  add("inf frequency_penalty", [](auto& p) { p.frequency_penalty = -kInf; }, "frequency_penalty");
  add("num_logprobs above 20", [](auto& p) { p.num_logprobs = 21; },
      "num_logprobs must be in [0, 20], got 21");
  add("negative num_logprobs", [](auto& p) { p.num_logprobs = -1; }, "num_logprobs must be");
  for (const InvalidCase& c : cases) {
    const absl::Status status = sampling::ValidateSamplingParams(c.params, 49152);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message)) << c.name;
  }
}

TEST(ValidateSamplingParamsTest, LogprobsBoundedBySmallVocab) {
  sampling::SamplingParams p;
  p.num_logprobs = 6;
  EXPECT_THAT(std::string(sampling::ValidateSamplingParams(p, 5).message()),
              HasSubstr("num_logprobs must be in [0, 5], got 6"));
  EXPECT_FALSE(sampling::ValidateSamplingParams(sampling::SamplingParams{}, 0).ok());
}

TEST(SamplerDeathTest, RequiresValidatedParams) {
  sampling::SamplingParams p;
  p.top_p = 2.0f;
  EXPECT_DEATH(Sampler(p, 10, {}), "validated");
}

}  // namespace
}  // namespace tessera::worker
