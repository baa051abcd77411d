// Sampler::RestoreGenerated: a sampler rebuilt after a preemption (prompt + the tokens generated
// so far) continues with exactly the tokens an uninterrupted sampler produces — penalties and the
// seeded RNG stream included.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "worker/sampler/sampler.h"

namespace tessera::worker {
namespace {

constexpr int kVocab = 1000;
constexpr int kSteps = 40;

// Peaked random logits, so penalties and filters change which tokens are drawn.
std::vector<std::vector<float>> RandomLogits(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<float>> rows(kSteps, std::vector<float>(kVocab));
  for (auto& row : rows) {
    for (float& v : row) v = normal(rng);
    for (int hot = 0; hot < 8; ++hot) row[hot * 37] += 6.0f;  // a few likely tokens repeat
  }
  return rows;
}

std::vector<int32_t> SampleAll(Sampler& sampler, const std::vector<std::vector<float>>& rows,
                               size_t from) {
  std::vector<int32_t> tokens;
  for (size_t i = from; i < rows.size(); ++i) tokens.push_back(sampler.Sample(rows[i]).token);
  return tokens;
}

TEST(SamplerRestoreTest, RestoredSamplerContinuesLikeAnUninterruptedOne) {
  const std::vector<int32_t> prompt = {37, 74, 5, 900};
  const std::vector<std::vector<float>> rows = RandomLogits(3);
  std::vector<sampling::SamplingParams> variants(4);
  variants[0] = {.temperature = 0.9f, .seed = 1234};
  variants[1] = {.temperature = 1.3f, .top_k = 50, .top_p = 0.9f, .min_p = 0.01f, .seed = 7};
  variants[2] = {.temperature = 0.7f, .repetition_penalty = 1.3f, .presence_penalty = 0.8f,
                 .frequency_penalty = 1.5f, .seed = 99};
  variants[3] = {.temperature = 0.0f, .frequency_penalty = 2.0f};  // greedy: no draws at all
  for (size_t v = 0; v < variants.size(); ++v) {
    Sampler uninterrupted(variants[v], kVocab, prompt);
    const std::vector<int32_t> expected = SampleAll(uninterrupted, rows, 0);
    for (size_t cut : {size_t{0}, size_t{1}, size_t{17}, size_t{kSteps - 1}}) {
      Sampler restored(variants[v], kVocab, prompt);
      restored.RestoreGenerated(std::span(expected).first(cut));
      const std::vector<int32_t> rest = SampleAll(restored, rows, cut);
      EXPECT_EQ(rest, std::vector<int32_t>(expected.begin() + cut, expected.end()))
          << "variant " << v << ", preempted after " << cut << " tokens";
    }
  }
}

TEST(SamplerRestoreTest, RecordingWithoutAdvancingTheRngDiverges) {
  // The reason RestoreGenerated exists: RecordGenerated alone replays penalties, not the draws.
  const std::vector<std::vector<float>> rows = RandomLogits(5);
  const sampling::SamplingParams params{.temperature = 1.0f, .seed = 42};
  Sampler uninterrupted(params, kVocab, {});
  const std::vector<int32_t> expected = SampleAll(uninterrupted, rows, 0);
  Sampler recorded(params, kVocab, {});
  for (size_t i = 0; i < 20; ++i) recorded.RecordGenerated(expected[i]);
  EXPECT_NE(SampleAll(recorded, rows, 20),
            std::vector<int32_t>(expected.begin() + 20, expected.end()));
}

}  // namespace
}  // namespace tessera::worker
