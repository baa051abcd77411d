// The synthetic-weight fill (random_uniform.cuh) on the emulator (every test schedule) or the GPU
// vs its CPU reference (random_uniform_reference.h), bit for bit: both compute one f32 fma of an
// exact unit value and round once to T. Sizes 1, 3, 15, 17, 97 and ones that are not a multiple
// of the block's 4 x 256 elements; a count past the grid's reach (the stride loop); bf16, f16
// and f32; nothing is written past `count`. The reference's own
// distribution (range, mean, independence of seeds and streams) is checked on the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/random_uniform.cuh"
#include "kernels/cuda/random_uniform_reference.h"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

// Elements after `count` that must keep their sentinel (the allocator rounds sizes up to 16
// bytes, so its guard page alone would not see a one-element overrun of a tail).
constexpr int64_t kSlack = 8;
constexpr float kSentinel = -7.0f;  // outside every tested [center - scale, center + scale]

template <typename T>
void CheckFill(const simt::Schedule& schedule, int64_t count, const RandomUniformParams& p) {
  DeviceBuffer<T> out(static_cast<size_t>(count + kSlack));
  for (int64_t i = 0; i < count + kSlack; ++i) out[i] = simt::FloatTo<T>(kSentinel);
  simt::TestLauncher launcher(schedule);
  const auto status = LaunchRandomUniform(launcher, out.get(), count, p);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<float> expected = reference::RandomUniform(p, count);
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_TRUE(simt::SameBits(out[i], simt::FloatTo<T>(expected[i])))
        << "count " << count << " seed " << p.seed << " stream " << p.stream << " i " << i
        << ": " << simt::AsFloat(out[i]) << " vs " << expected[i];
  }
  for (int64_t i = count; i < count + kSlack; ++i) {
    ASSERT_EQ(simt::AsFloat(out[i]), kSentinel) << "count " << count << ": wrote element " << i;
  }
}

template <typename T>
void CheckSizes(const simt::Schedule& schedule) {
  const RandomUniformParams params[] = {
      {.seed = 0, .stream = 0, .center = 0.0f, .scale = 1.0f},
      {.seed = 0x123456789ABCDEFull, .stream = 77, .center = 0.0f, .scale = 0.0221f},
      {.seed = 5, .stream = 3, .center = 1.0f, .scale = 0.0f},  // a constant (norm weights)
  };
  for (const RandomUniformParams& p : params) {
    for (int64_t count : {1, 3, 4, 15, 17, 97, 1023, 4 * kRandomUniformThreads * 3 + 5}) {
      CheckFill<T>(schedule, count, p);
    }
  }
}

class RandomUniformKernelTest : public simt::KernelTest {};

TEST_P(RandomUniformKernelTest, Bf16MatchesReference) { CheckSizes<__nv_bfloat16>(GetParam()); }
TEST_P(RandomUniformKernelTest, F16MatchesReference) { CheckSizes<__half>(GetParam()); }
TEST_P(RandomUniformKernelTest, F32MatchesReference) { CheckSizes<float>(GetParam()); }

// More groups of 4 than the capped grid has threads: every thread loops.
TEST_P(RandomUniformKernelTest, GridStrideCoversLargeCounts) {
  CheckFill<float>(GetParam(), int64_t{4} * kRandomUniformMaxBlocks * kRandomUniformThreads + 23,
                   {.seed = 9, .stream = 1, .center = 0.0f, .scale = 1.0f});
}

INSTANTIATE_TEST_SUITE_P(Schedules, RandomUniformKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

// The definition itself: values inside [center - scale, center + scale], mean near the centre,
// and a different seed or stream gives different values.
TEST(RandomUniformReference, IsUniformAroundTheCentreAndKeyedBySeedAndStream) {
  constexpr int64_t kCount = 1 << 16;
  const RandomUniformParams p{.seed = 42, .stream = 7, .center = 0.5f, .scale = 0.25f};
  const std::vector<float> values = reference::RandomUniform(p, kCount);
  double sum = 0;
  int64_t below_centre = 0;
  for (float v : values) {
    ASSERT_GT(v, 0.25f);
    ASSERT_LT(v, 0.75f);
    sum += v;
    below_centre += v < 0.5f;
  }
  // Uniform on (0.25, 0.75): standard deviation 0.144, so the mean's is 0.00056.
  EXPECT_NEAR(sum / kCount, 0.5, 0.003);
  EXPECT_NEAR(static_cast<double>(below_centre) / kCount, 0.5, 0.01);
  const float low = *std::min_element(values.begin(), values.end());
  const float high = *std::max_element(values.begin(), values.end());
  EXPECT_LT(low, 0.251f);
  EXPECT_GT(high, 0.749f);

  RandomUniformParams other_seed = p, other_stream = p;
  other_seed.seed = 43;
  other_stream.stream = 8;
  for (const RandomUniformParams& q : {other_seed, other_stream}) {
    const std::vector<float> other = reference::RandomUniform(q, kCount);
    int64_t equal = 0;
    for (int64_t i = 0; i < kCount; ++i) equal += other[i] == values[i];
    EXPECT_LT(equal, 16) << "seed " << q.seed << " stream " << q.stream;
  }
}

}  // namespace
}  // namespace tessera::cuda
