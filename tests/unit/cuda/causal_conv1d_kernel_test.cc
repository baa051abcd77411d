// Causal conv1d + SiLU CUDA kernel (causal_conv1d.cuh) on the emulator against the CPU kernel
// (kernels/cpu/causal_conv1d.h), which the CPU tests check against the f64 reference: f32, bf16
// and f16 activations, awkward channel counts and kernel sizes, one launch mixing sequences of
// 0, 1, 5, 64, 65 and 130 tokens in distinct non-contiguous slots, under every test schedule.
// The state must equal the CPU kernel's bit for bit (it holds inputs as read), slots not named
// must be untouched, and prefill then decode must equal one prefill bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/causal_conv1d.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/causal_conv1d.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

// Relative tolerance of an output: expf against the CPU's polynomial exp (a few f32 ulps), then
// one rounding to T, where the two sides may round to neighbouring values.
template <typename T>
float OutputTolerance() {
  if constexpr (std::is_same_v<T, float>) return 2e-6f;
  if constexpr (std::is_same_v<T, __half>) return 1.5e-3f;
  return 1e-2f;
}

struct ConvCase {
  int channels;
  int kernel_size;
};

// One step: sequences with `tokens[i]` rows in slot `slots[i]` of a pool of `num_slots`.
struct ConvStep {
  std::vector<int> tokens;
  std::vector<int> slots;
  int num_slots;
};

template <typename T>
void CheckConvStep(const simt::Schedule& schedule, const ConvCase& c, const ConvStep& step,
                   std::mt19937& rng) {
  const int history = c.kernel_size - 1;
  const int64_t x_stride = c.channels + 7;  // x is a view into a wider projection output
  const int64_t out_stride = c.channels + 3;
  std::vector<DeviceRecurrentSequence> device_seqs;
  std::vector<kernels::cpu::RecurrentSequence> cpu_seqs;
  int rows = 0;
  for (size_t i = 0; i < step.tokens.size(); ++i) {
    device_seqs.push_back({rows, step.tokens[i], step.slots[i]});
    cpu_seqs.push_back({rows, step.tokens[i], step.slots[i]});
    rows += step.tokens[i];
  }
  device_seqs.push_back({rows, 0, -1});  // a padding entry: reads and writes nothing
  const std::vector<T> x = simt::Convert<T>(simt::RandomFloats(rows * x_stride, rng, -2, 2));
  const std::vector<T> weight =
      simt::Convert<T>(simt::RandomFloats(size_t(c.channels) * c.kernel_size, rng, -1, 1));
  const std::vector<float> initial_states =
      simt::RandomFloats(size_t(step.num_slots) * history * c.channels, rng, -2, 2);
  DeviceBuffer<T> d_x{std::span<const T>(x)}, d_weight{std::span<const T>(weight)};
  DeviceBuffer<float> d_states{std::span<const float>(initial_states)};
  DeviceBuffer<DeviceRecurrentSequence> d_seqs{
      std::span<const DeviceRecurrentSequence>(device_seqs)};
  DeviceBuffer<T> d_out(std::max<size_t>(1, rows * out_stride));
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(LaunchCausalConv1d(launcher, static_cast<const T*>(d_x.get()), x_stride,
                                 static_cast<const T*>(d_weight.get()),
                                 static_cast<const DeviceRecurrentSequence*>(d_seqs.get()),
                                 static_cast<int>(device_seqs.size()), d_states.get(), d_out.get(),
                                 out_stride, c.channels, c.kernel_size, true)
                  .ok());

  // The CPU kernel on the values the device read (T rounded to f32).
  kernels::cpu::ThreadPool pool(1);
  std::vector<float> ref_states = initial_states;
  std::vector<float> ref_out(std::max<size_t>(1, rows * out_stride));
  kernels::cpu::CausalConv1d(pool, {c.channels, c.kernel_size, true}, simt::ToFloats<T>(weight),
                             simt::ToFloats<T>(x), x_stride, cpu_seqs, ref_states, ref_out,
                             out_stride);
  const std::string where =
      "C=" + std::to_string(c.channels) + " K=" + std::to_string(c.kernel_size);
  for (int r = 0; r < rows; ++r) {
    for (int ch = 0; ch < c.channels; ++ch) {
      const float expected = ref_out[r * out_stride + ch];
      ASSERT_NEAR(simt::AsFloat(d_out[r * out_stride + ch]), expected,
                  OutputTolerance<T>() * std::fabs(expected) + 1e-6f)
          << where << " row " << r << " channel " << ch;
    }
  }
  for (size_t i = 0; i < ref_states.size(); ++i) {
    ASSERT_EQ(d_states[i], ref_states[i]) << where << " state element " << i;
  }
  for (int slot = 0; slot < step.num_slots; ++slot) {  // slots not named: untouched
    if (std::find(step.slots.begin(), step.slots.end(), slot) != step.slots.end()) continue;
    for (int e = 0; e < history * c.channels; ++e) {
      const size_t i = size_t(slot) * history * c.channels + e;
      ASSERT_EQ(d_states[i], initial_states[i]) << where << " unnamed slot " << slot;
    }
  }
}

class CausalConv1dKernelTest : public simt::KernelTest {};

TEST_P(CausalConv1dKernelTest, MixedStepMatchesCpuKernel) {
  std::mt19937 rng(77);
  const ConvStep mixed{{0, 1, 5, 64, 65, 130, 1}, {3, 7, 0, 5, 9, 2, 10}, 12};
  for (ConvCase c : {ConvCase{37, 4}, {200, 4}, {33, 3}, {16, 1}, {40, 6}}) {
    CheckConvStep<float>(GetParam(), c, mixed, rng);
    CheckConvStep<__nv_bfloat16>(GetParam(), c, mixed, rng);
  }
  CheckConvStep<__half>(GetParam(), {97, 4}, mixed, rng);
}

TEST_P(CausalConv1dKernelTest, DecodeOnlyStep) {
  std::mt19937 rng(78);
  const ConvStep decode{{1, 1, 1, 1, 1}, {4, 1, 8, 0, 6}, 9};
  CheckConvStep<float>(GetParam(), {64, 4}, decode, rng);
  CheckConvStep<__nv_bfloat16>(GetParam(), {130, 4}, decode, rng);
}

// A prompt of 70 tokens as one launch, and as a 65-token prefill then five decode launches:
// outputs and final state bit-identical.
template <typename T>
void CheckPrefillThenDecode(const simt::Schedule& schedule, std::mt19937& rng) {
  const int channels = 45, kernel_size = 4, tokens = 70, prefill = 65, slot = 2;
  const int64_t state_size = int64_t{kernel_size - 1} * channels;
  const std::vector<T> x = simt::Convert<T>(simt::RandomFloats(tokens * channels, rng, -2, 2));
  const std::vector<T> weight =
      simt::Convert<T>(simt::RandomFloats(channels * kernel_size, rng, -1, 1));
  const std::vector<float> initial = simt::RandomFloats(4 * state_size, rng, -1, 1);
  DeviceBuffer<T> d_x{std::span<const T>(x)}, d_weight{std::span<const T>(weight)};
  DeviceBuffer<float> whole_states{std::span<const float>(initial)};
  DeviceBuffer<float> split_states{std::span<const float>(initial)};
  DeviceBuffer<T> whole_out(tokens * channels), split_out(tokens * channels);
  simt::TestLauncher launcher(schedule);
  auto run = [&](int begin, int count, DeviceBuffer<float>& states, DeviceBuffer<T>& out) {
    const std::vector<DeviceRecurrentSequence> seq = {{0, count, slot}};
    DeviceBuffer<DeviceRecurrentSequence> d_seq{std::span<const DeviceRecurrentSequence>(seq)};
    ASSERT_TRUE(LaunchCausalConv1d(launcher, static_cast<const T*>(d_x.get()) + begin * channels,
                                   channels, static_cast<const T*>(d_weight.get()),
                                   static_cast<const DeviceRecurrentSequence*>(d_seq.get()), 1,
                                   states.get(), out.get() + begin * channels, channels, channels,
                                   kernel_size, true)
                    .ok());
  };
  run(0, tokens, whole_states, whole_out);
  run(0, prefill, split_states, split_out);
  for (int t = prefill; t < tokens; ++t) run(t, 1, split_states, split_out);
  for (int i = 0; i < tokens * channels; ++i) {
    ASSERT_TRUE(simt::SameBits(whole_out[i], split_out[i])) << "out " << i;
  }
  for (int64_t i = 0; i < 4 * state_size; ++i) {
    ASSERT_TRUE(simt::SameBits(whole_states[i], split_states[i])) << "state " << i;
  }
}

TEST_P(CausalConv1dKernelTest, PrefillThenDecodeEqualsOnePrefill) {
  std::mt19937 rng(79);
  CheckPrefillThenDecode<float>(GetParam(), rng);
  CheckPrefillThenDecode<__nv_bfloat16>(GetParam(), rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, CausalConv1dKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
