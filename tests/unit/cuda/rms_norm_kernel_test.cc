// RMSNorm (+ fused residual) CUDA kernel on the emulator vs the f64 CPU reference, for bf16, f16
// and f32, awkward widths and row counts, under every test schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "kernels/cpu/reference.h"
#include "kernels/cuda/rms_norm.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

// Relative tolerance of one output: two roundings to T plus f32 accumulation.
template <typename T>
float Tolerance() {
  if constexpr (std::is_same_v<T, float>) return 1e-5f;
  if constexpr (std::is_same_v<T, __half>) return 2e-3f;
  return 1.6e-2f;  // bf16: 8-bit mantissa, two roundings
}

template <typename T>
void CheckRmsNorm(const simt::Schedule& schedule, int rows, int hidden, bool with_residual,
                  std::mt19937& rng) {
  const float eps = 1e-5f;
  const std::vector<T> x = simt::Convert<T>(simt::RandomFloats(size_t(rows) * hidden, rng, -2, 2));
  const std::vector<T> weight = simt::Convert<T>(simt::RandomFloats(hidden, rng, 0.5f, 1.5f));
  const std::vector<T> residual =
      simt::Convert<T>(simt::RandomFloats(size_t(rows) * hidden, rng, -2, 2));
  DeviceBuffer<T> d_x{std::span<const T>(x)}, d_weight{std::span<const T>(weight)};
  DeviceBuffer<T> d_residual{std::span<const T>(residual)}, d_out(size_t(rows) * hidden);
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(LaunchRmsNorm(launcher, static_cast<const T*>(d_x.get()),
                            with_residual ? d_residual.get() : nullptr,
                            static_cast<const T*>(d_weight.get()), d_out.get(), rows, hidden, eps)
                  .ok());

  // Reference: the residual sum rounded to T as the kernel stores it, then the f64 norm.
  std::vector<float> normed_input = simt::ToFloats<T>(x);
  if (with_residual) {
    for (size_t i = 0; i < normed_input.size(); ++i) {
      const T stored = simt::FloatTo<T>(normed_input[i] + simt::AsFloat(residual[i]));
      EXPECT_EQ(simt::AsFloat(d_residual[i]), simt::AsFloat(stored)) << "residual " << i;
      normed_input[i] = simt::AsFloat(stored);
    }
  }
  std::vector<float> expected(normed_input.size());
  kernels::cpu::reference::RmsNorm(normed_input, simt::ToFloats<T>(weight), eps, rows, expected);
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(simt::AsFloat(d_out[i]), expected[i],
                Tolerance<T>() * (std::fabs(expected[i]) + 1e-3f))
        << "rows=" << rows << " hidden=" << hidden << " i=" << i;
  }
}

class RmsNormKernelTest : public simt::KernelTest {};

TEST_P(RmsNormKernelTest, MatchesReferenceAtAwkwardSizes) {
  std::mt19937 rng(1234);
  // 97 and 1: scalar (not whole 16-byte vectors); 300: vectors for f32 only; the rest vectors.
  for (auto [rows, hidden] :
       {std::pair{1, 64}, {3, 97}, {17, 576}, {2, 1}, {1, 300}, {2, 4096}, {3, 40}}) {
    for (bool residual : {false, true}) {
      CheckRmsNorm<__nv_bfloat16>(GetParam(), rows, hidden, residual, rng);
      CheckRmsNorm<__half>(GetParam(), rows, hidden, residual, rng);
      CheckRmsNorm<float>(GetParam(), rows, hidden, residual, rng);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, RmsNormKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
