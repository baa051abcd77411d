// Gated RMSNorm CUDA kernel (gated_rms_norm.cuh) on the emulator against the f64 reference
// (kernels/cpu/gdn_reference.h): f32, bf16 and f16, awkward head sizes and token counts, the gate
// read through a strided view, in place and out of place, under every test schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/gdn_reference.h"
#include "kernels/cuda/gated_rms_norm.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

// Relative tolerance: f32 sums, rsqrtf and expf against f64, then one rounding to T.
template <typename T>
float Tolerance() {
  if constexpr (std::is_same_v<T, float>) return 1e-5f;
  if constexpr (std::is_same_v<T, __half>) return 2e-3f;
  return 8e-3f;
}

template <typename T>
void CheckGatedRmsNorm(const simt::Schedule& schedule, int tokens, int heads, int d, bool in_place,
                       std::mt19937& rng) {
  const float eps = 1e-6f;
  const int64_t rows = int64_t{tokens} * heads;
  const int64_t z_token_stride = int64_t{heads} * d + 5;  // a view into a wider projection
  const std::vector<T> x = simt::Convert<T>(simt::RandomFloats(rows * d, rng, -2, 2));
  const std::vector<T> z =
      simt::Convert<T>(simt::RandomFloats(tokens * z_token_stride, rng, -4, 4));
  const std::vector<T> weight = simt::Convert<T>(simt::RandomFloats(d, rng, 0.5f, 1.5f));
  DeviceBuffer<T> d_x{std::span<const T>(x)}, d_z{std::span<const T>(z)};
  DeviceBuffer<T> d_weight{std::span<const T>(weight)}, d_y(std::max<int64_t>(1, rows * d));
  T* y = in_place ? d_x.get() : d_y.get();
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(LaunchGatedRmsNorm(launcher, static_cast<const T*>(d_x.get()),
                                 static_cast<const T*>(d_z.get()), z_token_stride,
                                 static_cast<const T*>(d_weight.get()), y, tokens, heads, d, eps)
                  .ok());

  std::vector<float> z_rows(rows * d);  // the gate as contiguous [rows, d]
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < d; ++j) {
      z_rows[r * d + j] = simt::AsFloat(z[(r / heads) * z_token_stride + (r % heads) * d + j]);
    }
  }
  std::vector<float> expected(rows * d);
  kernels::cpu::reference::GatedRmsNorm(simt::ToFloats<T>(x), z_rows, simt::ToFloats<T>(weight),
                                        eps, rows, expected);
  for (int64_t i = 0; i < rows * d; ++i) {
    ASSERT_NEAR(simt::AsFloat(y[i]), expected[i], Tolerance<T>() * std::fabs(expected[i]) + 1e-6f)
        << "tokens=" << tokens << " heads=" << heads << " d=" << d << " i=" << i;
  }
}

class GatedRmsNormKernelTest : public simt::KernelTest {};

TEST_P(GatedRmsNormKernelTest, MatchesReferenceAtAwkwardSizes) {
  std::mt19937 rng(4321);
  struct Shape {
    int tokens, heads, d;
  };
  for (Shape s :
       {Shape{1, 1, 128}, {3, 3, 40}, {5, 2, 13}, {17, 4, 128}, {2, 3, 256}, {0, 2, 16}}) {
    for (bool in_place : {false, true}) {
      CheckGatedRmsNorm<float>(GetParam(), s.tokens, s.heads, s.d, in_place, rng);
      CheckGatedRmsNorm<__nv_bfloat16>(GetParam(), s.tokens, s.heads, s.d, in_place, rng);
      CheckGatedRmsNorm<__half>(GetParam(), s.tokens, s.heads, s.d, in_place, rng);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, GatedRmsNormKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
