// The structured-output logits mask (token_mask.cuh) on the emulator under every test schedule
// vs its CPU reference (kernels/cpu/token_mask.h), bit for bit: fresh random logits and masks,
// vocabularies that are and are not multiples of 32 and of the block strips (1, 31, 33, 97, 1000,
// 49152 + 7), batches of 1, 3 and 17 rows mixing guided rows (their masks in any order in the
// mask buffer, one shared by two rows) with unguided ones (mask row -1), which must keep every
// bit, -inf logits included; an all-allowed and an all-denied mask.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/token_mask.h"
#include "kernels/cuda/token_mask.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

struct Case {
  int vocab = 0;
  std::vector<int32_t> mask_rows;  // per logits row: a mask index, or -1
  int num_masks = 0;
};

void CheckCase(const simt::Schedule& schedule, const Case& c, std::mt19937& rng) {
  const int rows = static_cast<int>(c.mask_rows.size());
  const int words = (c.vocab + 31) / 32;
  std::normal_distribution<float> normal(0.0f, 3.0f);
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
  DeviceBuffer<int32_t> mask_rows(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) mask_rows[r] = c.mask_rows[r];
  simt::TestLauncher launcher(schedule);
  const auto status =
      LaunchTokenMask(launcher, logits.get(), rows, c.vocab, masks.get(), mask_rows.get());
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> expected(static_cast<size_t>(c.vocab));
  for (int r = 0; r < rows; ++r) {
    const std::span<const float> in(input.data() + static_cast<size_t>(r) * c.vocab,
                                    static_cast<size_t>(c.vocab));
    if (c.mask_rows[r] < 0) {
      expected.assign(in.begin(), in.end());
    } else {
      kernels::cpu::MaskLogits(
          in, std::span<const uint32_t>(masks.get() + c.mask_rows[r] * words, words), expected);
    }
    for (int t = 0; t < c.vocab; ++t) {
      ASSERT_TRUE(simt::SameBits(logits[static_cast<size_t>(r) * c.vocab + t], expected[t]))
          << "vocab " << c.vocab << " row " << r << " (mask " << c.mask_rows[r] << ") token "
          << t << ": " << logits[static_cast<size_t>(r) * c.vocab + t] << " vs " << expected[t];
    }
  }
}

class TokenMaskKernelTest : public simt::KernelTest {};

TEST_P(TokenMaskKernelTest, MatchesReferenceOnMixedBatches) {
  std::mt19937 rng(20261127);
  for (int vocab : {1, 31, 33, 97, 1000, 49152 + 7}) {
    CheckCase(GetParam(), {.vocab = vocab, .mask_rows = {2}, .num_masks = 3}, rng);
    CheckCase(GetParam(), {.vocab = vocab, .mask_rows = {-1, 3, 0}, .num_masks = 4}, rng);
    CheckCase(GetParam(),
              {.vocab = vocab,
               .mask_rows = {4, -1, -1, 1, 2, -1, 5, 3, -1, 6, 2, -1, -1, 0, 7, -1, 5},
               .num_masks = 8},
              rng);
  }
}

TEST_P(TokenMaskKernelTest, UnguidedRowsAreUntouched) {
  std::mt19937 rng(7);
  CheckCase(GetParam(), {.vocab = 97, .mask_rows = {-1, -1, -1}, .num_masks = 0}, rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, TokenMaskKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
