// The block-wide reductions of kernels/cuda/device_math.cuh on the emulator: a sum and then a
// max over the same shared scratch, back to back, as the sampler and the norms use them, under
// every test schedule and warp count. The second reduction must not overwrite the scratch while a
// warp of the first still reads it (the closing barrier of BlockReduce), nor read it before every
// warp wrote (the first barrier).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/device_math.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

// Every thread t writes out[2t] = Σ x and out[2t + 1] = max y over n values (each thread first
// reduces its strided share): every warp's result is checked, not only warp 0's.
__global__ void SumThenMax(const float* x, const float* y, int n, float* out) {
  TESSERA_SHARED(float, scratch, 32);
  float sum = 0.0f, max = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    sum += x[i];
    max = fmaxf(max, y[i]);
  }
  sum = BlockSum(sum, scratch);
  max = BlockMax(max, scratch);
  out[2 * threadIdx.x] = sum;
  out[2 * threadIdx.x + 1] = max;
}

class DeviceMathKernelTest : public simt::KernelTest {};

TEST_P(DeviceMathKernelTest, BackToBackBlockReductionsShareTheirScratch) {
  std::mt19937 rng(7);
  for (const int threads : {64, 96, 256, 1024}) {
    for (const int n : {1, 33, 1000}) {
      // Sums of magnitude ~n and maxima below -10: a sum read from a max's partials (or the
      // reverse) is far off.
      const std::vector<float> x = simt::RandomFloats(n, rng, 1.0f, 2.0f);
      const std::vector<float> y = simt::RandomFloats(n, rng, -20.0f, -10.0f);
      DeviceBuffer<float> d_x{std::span<const float>(x)}, d_y{std::span<const float>(y)};
      DeviceBuffer<float> d_out(2 * threads);
      simt::TestLauncher launcher(GetParam());
      ASSERT_TRUE(launcher.Launch(LaunchShape{dim3(1), dim3(threads)}, SumThenMax,
                                  static_cast<const float*>(d_x.get()),
                                  static_cast<const float*>(d_y.get()), n, d_out.get())
                      .ok());
      double sum = 0;
      for (float v : x) sum += v;
      const float max = *std::max_element(y.begin(), y.end());
      int wrong = 0;
      for (int t = 0; t < threads; ++t) {
        wrong += std::abs(d_out[2 * t] - sum) > 1e-5 * sum || d_out[2 * t + 1] != max;
      }
      EXPECT_EQ(wrong, 0) << threads << " threads, n " << n << ": thread 0 got " << d_out[0]
                          << " and " << d_out[1] << ", want " << sum << " and " << max;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, DeviceMathKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
