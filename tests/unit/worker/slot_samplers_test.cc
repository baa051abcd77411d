// SlotSamplers (the per-slot sampling state of host-sampling runners): rows sample with their
// slot's sampler whatever their batch position, Begin replays generated tokens, CheckRows names
// the bad row, and broken preconditions (a slot started twice, ended while free) abort.
#include "worker/sampler/slot_samplers.h"

#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

constexpr int kVocab = 300;

std::vector<float> RandomRow(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(kVocab);
  for (float& v : row) v = normal(rng);
  return row;
}

// Logits for rows `sequence_index` of a batch, row r = RandomRow(seed + r).
StepLogits Logits(std::vector<int32_t> sequence_index, uint64_t seed) {
  StepLogits logits{
      .vocab_size = kVocab, .sequence_index = std::move(sequence_index), .values = {}};
  for (size_t r = 0; r < logits.sequence_index.size(); ++r) {
    const std::vector<float> row = RandomRow(seed + r);
    logits.values.insert(logits.values.end(), row.begin(), row.end());
  }
  return logits;
}

const int32_t kToken[] = {1};

// A one-token batch entry (SlotSamplers reads only needs_logits and slot).
SequenceWork Work(bool needs_logits, int32_t slot) {
  return {.tokens = kToken, .start_pos = 0, .block_table = {}, .needs_logits = needs_logits,
          .slot = slot};
}

TEST(SlotSamplersTest, RowsSampleWithTheirSlotsSampler) {
  const sampling::SamplingParams a{.temperature = 0.9f, .seed = 1, .num_logprobs = 2};
  const sampling::SamplingParams b{.temperature = 0.0f, .frequency_penalty = 1.0f};
  const std::vector<int32_t> prompt = {5, 6, 7};
  SlotSamplers samplers(4, kVocab);
  samplers.Begin(3, a, prompt, {});
  samplers.Begin(1, b, prompt, {});
  EXPECT_TRUE(samplers.started(3));
  EXPECT_FALSE(samplers.started(0));
  EXPECT_FALSE(samplers.started(-1));
  EXPECT_FALSE(samplers.started(4));
  Sampler expect_a(a, kVocab, prompt);
  Sampler expect_b(b, kVocab, prompt);
  // Batch: [a row that does not sample, slot 3, slot 1].
  StepSamples samples;
  for (uint64_t step = 0; step < 10; ++step) {
    const std::vector<SequenceWork> batch = {Work(false, -1), Work(true, 3), Work(true, 1)};
    ASSERT_TRUE(samplers.CheckRows(batch).ok());
    const StepLogits logits = Logits({1, 2}, 100 * step);
    samplers.SampleRows(batch, logits, &samples);
    ASSERT_EQ(samples.sequence_index, std::vector<int32_t>({1, 2}));
    ASSERT_EQ(samples.rows.size(), 2u);
    const SampleResult ra = expect_a.Sample(logits.Row(0));
    const SampleResult rb = expect_b.Sample(logits.Row(1));
    EXPECT_EQ(samples.rows[0].token, ra.token);
    EXPECT_EQ(samples.rows[0].logprob, ra.logprob);
    EXPECT_EQ(samples.rows[0].top_logprobs.size(), 2u);
    EXPECT_EQ(samples.rows[1].token, rb.token);
    EXPECT_TRUE(samples.rows[1].top_logprobs.empty());
  }
  // Ended and begun again with what it generated: continues like expect_a.
  std::vector<int32_t> generated;
  Sampler replay(a, kVocab, prompt);
  for (uint64_t step = 0; step < 10; ++step) {
    generated.push_back(replay.Sample(Logits({0}, 100 * step).Row(0)).token);
  }
  samplers.End(3);
  EXPECT_FALSE(samplers.started(3));
  samplers.Begin(0, a, prompt, generated);
  const std::vector<SequenceWork> one = {Work(true, 0)};
  for (uint64_t step = 10; step < 20; ++step) {
    const StepLogits logits = Logits({0}, 100 * step);
    samplers.SampleRows(one, logits, &samples);
    EXPECT_EQ(samples.rows[0].token, expect_a.Sample(logits.Row(0)).token) << "step " << step;
  }
}

TEST(SlotSamplersTest, CheckRowsNamesTheRowAndSlot) {
  SlotSamplers samplers(4, kVocab);
  samplers.Begin(2, {}, {}, {});
  std::vector<SequenceWork> batch = {Work(true, 2), Work(false, 9), Work(true, 1)};
  absl::Status status = samplers.CheckRows(batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("batch[2]: slot 1 samples but its sequence was not"));
  batch[2].slot = 4;
  EXPECT_THAT(samplers.CheckRows(batch).message(), HasSubstr("batch[2]: slot 4 is outside [0, 4)"));
  batch[2].slot = -1;
  EXPECT_THAT(samplers.CheckRows(batch).message(), HasSubstr("batch[2]: slot -1 is outside"));
  batch[2].needs_logits = false;  // a row that does not sample needs no slot
  EXPECT_TRUE(samplers.CheckRows(batch).ok());
}

TEST(SlotSamplersDeathTest, BrokenPreconditionsAbort) {
  SlotSamplers samplers(2, kVocab);
  samplers.Begin(0, {}, {}, {});
  EXPECT_DEATH(samplers.Begin(0, {}, {}, {}), "already started");
  EXPECT_DEATH(samplers.Begin(2, {}, {}, {}), "out of range");
  EXPECT_DEATH(samplers.End(1), "not started");
  const std::vector<int32_t> bad = {kVocab};
  EXPECT_DEATH(samplers.Begin(1, {}, bad, {}), "outside the vocabulary");
  EXPECT_DEATH(samplers.Begin(1, {.top_p = 0.0f}, {}, {}), "invalid sampling parameters");
}

}  // namespace
}  // namespace tessera::worker
