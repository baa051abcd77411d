// GDN gates CUDA kernel (gdn_gates.cuh) on the emulator against the CPU kernel
// (kernels/cpu/gated_delta_rule.h GdnGates) and the f64 reference: b and alpha read through
// strided views of f32, bf16 and f16, pre-activations on both sides of softplus's threshold 20,
// under every test schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "kernels/cpu/gated_delta_rule.h"
#include "kernels/cpu/gdn_reference.h"
#include "kernels/cuda/gdn_gates.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

template <typename T>
void CheckGates(const simt::Schedule& schedule, int64_t rows, int heads, std::mt19937& rng) {
  // One [rows, 2·h_v + 3] projection output: b at offset 0, alpha at offset h_v.
  const int64_t stride = 2 * heads + 3;
  const std::vector<T> ba = simt::Convert<T>(simt::RandomFloats(rows * stride, rng, -8, 8));
  const std::vector<float> a_coef = simt::RandomFloats(heads, rng, -3, -0.01f);
  std::vector<float> dt_bias = simt::RandomFloats(heads, rng, -2, 2);
  dt_bias[0] = 19.0f;  // alpha + dt_bias straddles the threshold 20 on head 0
  DeviceBuffer<T> d_ba{std::span<const T>(ba)};
  DeviceBuffer<float> d_a{std::span<const float>(a_coef)}, d_dt{std::span<const float>(dt_bias)};
  DeviceBuffer<float> d_g(std::max<int64_t>(1, rows * heads)),
      d_beta(std::max<int64_t>(1, rows * heads));
  simt::TestLauncher launcher(schedule);
  const T* b = d_ba.get();
  ASSERT_TRUE(
      LaunchGdnGates(launcher, b, stride, b + heads, stride, static_cast<const float*>(d_a.get()),
                     static_cast<const float*>(d_dt.get()), rows, heads, d_g.get(), d_beta.get())
          .ok());
  if (rows == 0) return;  // nothing to compare (the launch must still succeed)
  const std::vector<float> ba_read = simt::ToFloats<T>(ba);
  std::vector<float> g(rows * heads), beta(rows * heads);
  kernels::cpu::GdnGates(ba_read, stride, std::span<const float>(ba_read).subspan(heads), stride,
                         a_coef, dt_bias, rows, g, beta);
  std::vector<float> b_rows(rows * heads), alpha_rows(rows * heads);
  for (int64_t r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      b_rows[r * heads + h] = ba_read[r * stride + h];
      alpha_rows[r * heads + h] = ba_read[r * stride + heads + h];
    }
  }
  std::vector<float> ref_g(rows * heads), ref_beta(rows * heads);
  kernels::cpu::reference::GdnGates(b_rows, alpha_rows, a_coef, dt_bias, rows, ref_g, ref_beta);
  for (int64_t i = 0; i < rows * heads; ++i) {
    ASSERT_NEAR(d_g[i], g[i], 2e-6f * std::fabs(g[i]) + 1e-7f) << "g " << i;
    ASSERT_NEAR(d_beta[i], beta[i], 1e-6f) << "beta " << i;
    // softplus(x > 20) = x is off by < e^-20 relative to the exact reference
    ASSERT_NEAR(d_g[i], ref_g[i], 2e-6f * std::fabs(ref_g[i]) + 1e-7f) << "g vs f64 " << i;
    ASSERT_NEAR(d_beta[i], ref_beta[i], 1e-6f) << "beta vs f64 " << i;
  }
}

class GdnGatesKernelTest : public simt::KernelTest {};

TEST_P(GdnGatesKernelTest, MatchesCpuKernelAndReference) {
  std::mt19937 rng(99);
  for (auto [rows, heads] : {std::pair<int64_t, int>{1, 1}, {5, 3}, {130, 32}, {0, 4}, {17, 7}}) {
    CheckGates<float>(GetParam(), rows, heads, rng);
    CheckGates<__nv_bfloat16>(GetParam(), rows, heads, rng);
    CheckGates<__half>(GetParam(), rows, heads, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, GdnGatesKernelTest, ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
