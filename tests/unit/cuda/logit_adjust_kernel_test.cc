// The logits adjustments before sampling (logit_adjust.cuh: logit_bias, then the
// structured-output mask) on the emulator under every test schedule vs their CPU reference
// (kernels/cpu/logit_adjust.h), bit for bit: fresh random logits, biases and masks;
// vocabularies that are and are not multiples of 32 and of the block strips (1, 31, 33, 97, 1000,
// 49152 + 7); batches of 1, 3 and 17 rows mixing rows with a bias, a mask, both and neither (the
// masks in any order in the mask buffer, one shared by two rows); a bias on the first and last
// token and across strip boundaries; an all-allowed and an all-denied mask; untouched rows keep
// every bit, -inf logits included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/logit_adjust.h"
#include "kernels/cuda/logit_adjust.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

struct Row {
  int32_t mask = -1;       // index into the masks, or -1
  int num_biases = 0;      // random distinct tokens (first and last included when >= 2)
};

struct Case {
  int vocab = 0;
  std::vector<Row> rows;
  int num_masks = 0;
};

// min(count, vocab) distinct tokens: the first and last (when count >= 2), then random others.
std::vector<int32_t> BiasTokens(int vocab, int count, std::mt19937& rng) {
  const size_t want = static_cast<size_t>(std::min(count, vocab));
  std::vector<int32_t> middle;
  for (int32_t t = 1; t + 1 < vocab; ++t) middle.push_back(t);
  std::shuffle(middle.begin(), middle.end(), rng);
  std::vector<int32_t> tokens;
  if (want >= 2) tokens = {0, vocab - 1};
  for (size_t i = 0; tokens.size() < want && i < middle.size(); ++i) tokens.push_back(middle[i]);
  if (tokens.size() < want) tokens.push_back(0);  // one token of a vocabulary of 1 or 2
  std::sort(tokens.begin(), tokens.end());
  return tokens;
}

void CheckCase(const simt::Schedule& schedule, const Case& c, std::mt19937& rng) {
  const int rows = static_cast<int>(c.rows.size());
  const int words = (c.vocab + 31) / 32;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<float> bias(-100.0f, 100.0f);
  DeviceBuffer<float> logits(static_cast<size_t>(rows) * c.vocab);
  std::vector<float> input(static_cast<size_t>(rows) * c.vocab);
  for (size_t i = 0; i < input.size(); ++i) {
    input[i] = i % 11 == 5 ? -INFINITY : normal(rng);  // a model's own -inf stays -inf
    logits[i] = input[i];
  }
  DeviceBuffer<uint32_t> masks(static_cast<size_t>(std::max(c.num_masks, 1)) * words);
  for (int m = 0; m < c.num_masks; ++m) {
    for (int w = 0; w < words; ++w) {
      // Mask 0 allows everything, mask 1 nothing, the rest are random.
      masks[m * words + w] = m == 0 ? ~0u : m == 1 ? 0u : static_cast<uint32_t>(rng());
    }
  }
  std::vector<int32_t> offsets{0}, tokens;
  std::vector<float> values;
  for (const Row& row : c.rows) {
    for (int32_t t : BiasTokens(c.vocab, row.num_biases, rng)) {
      tokens.push_back(t);
      values.push_back(bias(rng));
    }
    offsets.push_back(static_cast<int32_t>(tokens.size()));
  }
  DeviceBuffer<int32_t> d_offsets(offsets.size()), d_tokens(std::max<size_t>(tokens.size(), 1)),
      mask_rows(static_cast<size_t>(rows));
  DeviceBuffer<float> d_values(std::max<size_t>(values.size(), 1));
  for (size_t i = 0; i < offsets.size(); ++i) d_offsets[i] = offsets[i];
  for (size_t i = 0; i < tokens.size(); ++i) d_tokens[i] = tokens[i], d_values[i] = values[i];
  for (const int32_t t : tokens) ASSERT_TRUE(t >= 0 && t < c.vocab) << "test bug: token " << t;
  for (int r = 0; r < rows; ++r) mask_rows[r] = c.rows[r].mask;
  simt::TestLauncher launcher(schedule);
  const auto status = LaunchLogitAdjust(
      launcher, logits.get(), rows, c.vocab,
      {.bias_offsets = d_offsets.get(), .bias_tokens = d_tokens.get(),
       .bias_values = d_values.get(), .masks = masks.get(), .mask_rows = mask_rows.get()});
  ASSERT_TRUE(status.ok()) << status;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> expected(input.begin() + static_cast<ptrdiff_t>(r) * c.vocab,
                                input.begin() + static_cast<ptrdiff_t>(r + 1) * c.vocab);
    const size_t begin = static_cast<size_t>(offsets[r]), end = static_cast<size_t>(offsets[r + 1]);
    kernels::cpu::AddLogitBias(expected, std::span(tokens).subspan(begin, end - begin),
                               std::span(values).subspan(begin, end - begin));
    if (c.rows[r].mask >= 0) {
      kernels::cpu::MaskLogits(
          expected, std::span<const uint32_t>(masks.get() + c.rows[r].mask * words, words),
          expected);
    }
    for (int t = 0; t < c.vocab; ++t) {
      ASSERT_TRUE(simt::SameBits(logits[static_cast<size_t>(r) * c.vocab + t], expected[t]))
          << "vocab " << c.vocab << " row " << r << " (mask " << c.rows[r].mask << ", "
          << c.rows[r].num_biases << " biases) token " << t << ": "
          << logits[static_cast<size_t>(r) * c.vocab + t] << " vs " << expected[t];
    }
  }
}

class LogitAdjustKernelTest : public simt::KernelTest {};

TEST_P(LogitAdjustKernelTest, MatchesReferenceOnMixedBatches) {
  std::mt19937 rng(20261127);
  for (int vocab : {1, 31, 33, 97, 1000, 49152 + 7}) {
    CheckCase(GetParam(), {.vocab = vocab, .rows = {{.mask = 2}}, .num_masks = 3}, rng);
    CheckCase(GetParam(),
              {.vocab = vocab,
               .rows = {{.mask = -1, .num_biases = 5}, {.mask = 3, .num_biases = 2}, {.mask = 0}},
               .num_masks = 4},
              rng);
    std::vector<Row> seventeen;
    for (int r = 0; r < 17; ++r) {
      seventeen.push_back({.mask = r % 3 == 1 ? -1 : (r * 5) % 8, .num_biases = (r % 4) * 7});
    }
    CheckCase(GetParam(), {.vocab = vocab, .rows = seventeen, .num_masks = 8}, rng);
  }
}

TEST_P(LogitAdjustKernelTest, RowsWithNothingToDoAreUntouched) {
  std::mt19937 rng(7);
  CheckCase(GetParam(), {.vocab = 97, .rows = {{}, {}, {}}, .num_masks = 0}, rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, LogitAdjustKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
