// CpuModelRunner::Step on the tiny generated model: it samples exactly what worker::Sampler draws
// from Forward's logits (greedy and seeded stochastic, logprobs and top logprobs, penalties, in a
// mixed batch), a sequence ended and re-begun with its generated tokens continues exactly like an
// uninterrupted one, and a sampling row on a slot that was not started is INVALID_ARGUMENT with
// nothing computed, written or sampled.
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/unit/worker/tiny_model_fixture.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/sampler/sampler.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

constexpr int kBlockSize = 4;
constexpr int kNumBlocks = 64;
constexpr int kBlocksPerSeq = 12;  // up to 48 tokens per sequence

// One sequence driven by hand: all its known tokens, how many are computed, its blocks and slot.
struct Seq {
  std::vector<int32_t> tokens{};
  int32_t num_prompt = 0;
  int32_t computed = 0;
  std::vector<int32_t> blocks{};
  int slot = -1;
  sampling::SamplingParams params{};
  std::vector<SampleResult> sampled{};
};

Seq MakeSeq(std::vector<int32_t> prompt, int index, int slot,
            const sampling::SamplingParams& params) {
  Seq s{.tokens = std::move(prompt), .slot = slot, .params = params};
  s.num_prompt = static_cast<int32_t>(s.tokens.size());
  s.blocks.resize(kBlocksPerSeq);
  std::iota(s.blocks.begin(), s.blocks.end(), 1 + index * kBlocksPerSeq);
  return s;
}

// The batch of one step: each sequence computes up to `chunk` of its uncomputed tokens.
std::vector<SequenceWork> NextBatch(std::vector<Seq>& seqs, int chunk) {
  std::vector<SequenceWork> batch;
  for (Seq& s : seqs) {
    const int32_t known = static_cast<int32_t>(s.tokens.size());
    const int32_t n = std::min(chunk, known - s.computed);
    batch.push_back({.tokens = std::span(s.tokens).subspan(s.computed, n),
                     .start_pos = s.computed,
                     .block_table = s.blocks,
                     .needs_logits = s.computed + n == known,
                     .slot = s.slot});
    s.computed += n;
  }
  return batch;
}

bool SameResult(const SampleResult& a, const SampleResult& b) {
  if (a.token != b.token || std::memcmp(&a.logprob, &b.logprob, sizeof(float)) != 0 ||
      a.top_logprobs.size() != b.top_logprobs.size()) {
    return false;
  }
  for (size_t i = 0; i < a.top_logprobs.size(); ++i) {
    if (a.top_logprobs[i].token != b.top_logprobs[i].token ||
        std::memcmp(&a.top_logprobs[i].logprob, &b.top_logprobs[i].logprob, sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

class CpuRunnerSamplingTest : public testing::TinyModelTest {
 protected:
  // Starts each sequence's slot: its prompt, and the tokens it generated before (if any).
  static void Begin(CpuModelRunner& runner, const std::vector<Seq>& seqs) {
    for (const Seq& s : seqs) {
      const std::span<const int32_t> all(s.tokens);
      runner.BeginSequence(s.slot, s.params, all.first(s.num_prompt), all.subspan(s.num_prompt));
    }
  }

  // Runs started `seqs` through runner.Step (chunked prefill, then decodes) until the first has
  // `num_samples` sampled tokens; every sampled token is appended to its sequence.
  static void GenerateWithStep(CpuModelRunner& runner, std::vector<Seq>& seqs, int chunk,
                               int num_samples) {
    StepSamples samples;
    while (seqs[0].sampled.size() < static_cast<size_t>(num_samples)) {
      const std::vector<SequenceWork> batch = NextBatch(seqs, chunk);
      ASSERT_TRUE(runner.Step(batch, &samples).ok());
      ASSERT_EQ(samples.rows.size(), samples.sequence_index.size());
      EXPECT_EQ(samples.info.device_seconds, -1);
      EXPECT_GT(samples.info.launch_seconds, 0);
      EXPECT_FALSE(samples.info.graph_replayed || samples.info.graph_captured);
      EXPECT_FALSE(samples.info.graph_miss.has_value());
      for (size_t r = 0; r < samples.rows.size(); ++r) {
        Seq& s = seqs[samples.sequence_index[r]];
        s.sampled.push_back(samples.rows[r]);
        s.tokens.push_back(samples.rows[r].token);
      }
    }
  }

  // The same with runner.Forward and one Sampler per sequence on the host.
  static void GenerateWithForward(CpuModelRunner& runner, std::vector<Seq>& seqs, int chunk,
                                  int num_samples) {
    std::vector<Sampler> samplers;
    for (Seq& s : seqs) {
      samplers.emplace_back(s.params, config().vocab_size,
                            std::span(s.tokens).first(s.num_prompt));
    }
    StepLogits logits;
    while (seqs[0].sampled.size() < static_cast<size_t>(num_samples)) {
      const std::vector<SequenceWork> batch = NextBatch(seqs, chunk);
      ASSERT_TRUE(runner.Forward(batch, &logits).ok());
      for (size_t r = 0; r < logits.sequence_index.size(); ++r) {
        const int32_t i = logits.sequence_index[r];
        seqs[i].sampled.push_back(samplers[i].Sample(logits.Row(r)));
        seqs[i].tokens.push_back(seqs[i].sampled.back().token);
      }
    }
  }
};

TEST_F(CpuRunnerSamplingTest, StepSamplesWhatSamplerDrawsFromForwardLogits) {
  const std::vector<sampling::SamplingParams> params = {
      {.temperature = 0.0f},
      {.temperature = 0.0f, .frequency_penalty = 1.5f, .num_logprobs = 5},
      {.temperature = 0.9f, .seed = 11, .num_logprobs = 3},
      {.temperature = 1.2f, .top_k = 40, .top_p = 0.9f, .min_p = 0.02f, .seed = 12},
      {.temperature = 0.8f, .repetition_penalty = 1.3f, .presence_penalty = 0.5f, .seed = 13,
       .num_logprobs = 20},
  };
  const std::vector<int> prompt_lengths = {5, 13, 1, 21, 8};
  // Slots out of batch order, so a runner sampling by batch position instead of slot fails.
  const std::vector<int> slots = {7, 2, 5, 0, 3};
  auto make = [&] {
    std::vector<Seq> seqs;
    for (size_t i = 0; i < params.size(); ++i) {
      seqs.push_back(MakeSeq(Prompt(prompt_lengths[i], static_cast<int>(i) + 1),
                             static_cast<int>(i), slots[i], params[i]));
    }
    return seqs;
  };
  std::vector<Seq> stepped = make();
  std::vector<Seq> forwarded = make();
  auto step_runner = MakeRunner(kBlockSize, kNumBlocks);
  auto forward_runner = MakeRunner(kBlockSize, kNumBlocks);
  Begin(*step_runner, stepped);
  GenerateWithStep(*step_runner, stepped, /*chunk=*/6, /*num_samples=*/16);
  GenerateWithForward(*forward_runner, forwarded, /*chunk=*/6, /*num_samples=*/16);
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(stepped[i].sampled.size(), forwarded[i].sampled.size()) << "sequence " << i;
    for (size_t t = 0; t < stepped[i].sampled.size(); ++t) {
      EXPECT_TRUE(SameResult(stepped[i].sampled[t], forwarded[i].sampled[t]))
          << "sequence " << i << " token " << t;
      EXPECT_EQ(stepped[i].sampled[t].top_logprobs.size(),
                static_cast<size_t>(params[i].num_logprobs));
      EXPECT_LT(stepped[i].sampled[t].logprob, 0.0f);
    }
  }
  // The stochastic rows really drew: seeded sequence 2 did not always take the most likely token.
  int not_argmax = 0;
  for (const SampleResult& r : stepped[2].sampled) {
    not_argmax += r.token != r.top_logprobs[0].token ? 1 : 0;
  }
  EXPECT_GT(not_argmax, 0);
}

// Uninterrupted: one sequence sampled 20 tokens. Interrupted: after `cut` tokens its slot is
// ended, the sequence is begun again (in another slot, with its generated tokens) and all its
// known tokens are recomputed in fresh blocks, as after a preemption.
TEST_F(CpuRunnerSamplingTest, EndedAndRebegunSequenceContinuesLikeAnUninterruptedOne) {
  const sampling::SamplingParams params{.temperature = 1.1f, .top_k = 50,
                                        .repetition_penalty = 1.2f, .presence_penalty = 0.6f,
                                        .frequency_penalty = 0.9f, .seed = 77, .num_logprobs = 2};
  constexpr int kTokens = 20;
  auto uninterrupted_runner = MakeRunner(kBlockSize, kNumBlocks);
  std::vector<Seq> uninterrupted = {MakeSeq(Prompt(9, 3), 0, /*slot=*/1, params)};
  Begin(*uninterrupted_runner, uninterrupted);
  GenerateWithStep(*uninterrupted_runner, uninterrupted, /*chunk=*/4, kTokens);

  for (int cut : {1, 7, 19}) {
    SCOPED_TRACE(::testing::Message() << "ended after " << cut << " tokens");
    auto runner = MakeRunner(kBlockSize, kNumBlocks);
    std::vector<Seq> first = {MakeSeq(Prompt(9, 3), 0, /*slot=*/1, params)};
    Begin(*runner, first);
    GenerateWithStep(*runner, first, /*chunk=*/4, cut);
    runner->EndSequence(1);
    Seq again = MakeSeq(first[0].tokens, /*index=*/1, /*slot=*/3, params);
    again.num_prompt = first[0].num_prompt;
    again.sampled = first[0].sampled;
    std::vector<Seq> rest = {std::move(again)};
    Begin(*runner, rest);
    GenerateWithStep(*runner, rest, /*chunk=*/5, kTokens);
    EXPECT_EQ(rest[0].tokens, uninterrupted[0].tokens);
    ASSERT_EQ(rest[0].sampled.size(), uninterrupted[0].sampled.size());
    for (size_t t = 0; t < rest[0].sampled.size(); ++t) {
      EXPECT_TRUE(SameResult(rest[0].sampled[t], uninterrupted[0].sampled[t])) << "token " << t;
    }
  }

  // Control: begun again without its generated tokens (they count as prompt instead), the
  // RNG restarts and the penalties differ, so the continuation is not the uninterrupted one.
  auto runner = MakeRunner(kBlockSize, kNumBlocks);
  std::vector<Seq> first = {MakeSeq(Prompt(9, 3), 0, /*slot=*/1, params)};
  Begin(*runner, first);
  GenerateWithStep(*runner, first, /*chunk=*/4, 7);
  runner->EndSequence(1);
  std::vector<Seq> rest = {MakeSeq(first[0].tokens, 1, /*slot=*/1, params)};
  Begin(*runner, rest);
  GenerateWithStep(*runner, rest, /*chunk=*/5, kTokens - 7);
  EXPECT_NE(rest[0].tokens, uninterrupted[0].tokens);
}

TEST_F(CpuRunnerSamplingTest, SamplingRowOnAnUnstartedSlotIsRejectedAndNothingHappens) {
  const sampling::SamplingParams params{.temperature = 1.0f, .seed = 5};
  // `runner` sees the rejected steps, `reference` does not; afterwards both must agree.
  auto runner = MakeRunner(kBlockSize, kNumBlocks);
  auto reference = MakeRunner(kBlockSize, kNumBlocks);
  std::vector<Seq> seqs = {MakeSeq(Prompt(8, 4), 0, /*slot=*/2, params)};
  std::vector<Seq> reference_seqs = seqs;
  Begin(*runner, seqs);
  Begin(*reference, reference_seqs);
  GenerateWithStep(*runner, seqs, /*chunk=*/8, 1);
  GenerateWithStep(*reference, reference_seqs, /*chunk=*/8, 1);
  ASSERT_EQ(seqs[0].tokens, reference_seqs[0].tokens);

  // Row 0 decodes the started sequence (it would sample); row 1 rewrites that sequence's
  // computed positions with other tokens and asks to sample on a slot that is not started.
  const std::vector<int32_t> junk = Prompt(5, 9);
  for (int bad_slot : {0, -1, runner->max_num_seqs()}) {
    SCOPED_TRACE(::testing::Message() << "slot " << bad_slot);
    const std::vector<SequenceWork> batch = {
        {.tokens = std::span(seqs[0].tokens).last(1), .start_pos = 8,
         .block_table = seqs[0].blocks, .needs_logits = true, .slot = 2},
        {.tokens = junk, .start_pos = 0, .block_table = seqs[0].blocks, .needs_logits = true,
         .slot = bad_slot}};
    StepSamples samples;
    samples.rows.resize(3);  // stale output: cleared
    const absl::Status status = runner->Step(batch, &samples);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("batch[1]"));
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("slot ", bad_slot)));
    EXPECT_TRUE(samples.rows.empty());
    EXPECT_TRUE(samples.sequence_index.empty());
  }
  // Neither the K/V of the first 8 positions nor slot 2's RNG moved.
  GenerateWithStep(*runner, seqs, /*chunk=*/8, 6);
  GenerateWithStep(*reference, reference_seqs, /*chunk=*/8, 6);
  EXPECT_EQ(seqs[0].tokens, reference_seqs[0].tokens);
}

}  // namespace
}  // namespace tessera::worker
