// SwiGLU kernel on the emulator vs the f64 reference (kernels/cpu/reference.h), fused gate_up and
// separate gate/up layouts, the 16-byte vector path and the scalar fallback (odd widths,
// misaligned buffers), in place, bf16 / f16 / f32, awkward widths and token counts, under every
// test schedule.
//
// Tolerance: |got - ref| <= rel(T) * |ref| + 1e-6, with rel = 2^-8 for bf16 and 2^-10 for f16 (the
// one rounding to T is at most half an ulp: 2^-9 / 2^-11 relative; the rest is slack for the f32
// math) and 2e-6 for f32 (a few f32 ulp: exp, divide and multiply each round once; on the GPU
// __expf adds ~2 ulp). The 1e-6 absolute term covers f16 subnormal outputs near zero.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/cuda/activations.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

template <typename T>
float RelativeTolerance() {
  if constexpr (std::is_same_v<T, float>) return 2e-6f;
  if constexpr (std::is_same_v<T, __half>) return 1.0f / 1024;
  return 1.0f / 256;
}

enum class Layout { kFused, kSeparate, kInPlace };

// offset: elements every device pointer is shifted by (1 breaks 16-byte alignment).
template <typename T>
void CheckSwiGlu(const simt::Schedule& schedule, Layout layout, int tokens, int width, int offset,
                 std::mt19937& rng) {
  const size_t n = size_t(tokens) * width;
  const std::vector<float> gate_f = simt::RandomFloats(n, rng, -12, 12);
  const std::vector<float> up_f = simt::RandomFloats(n, rng, -3, 3);
  const std::vector<T> gate = simt::Convert<T>(gate_f), up = simt::Convert<T>(up_f);
  std::vector<T> gate_up(2 * n);  // [tokens, 2 * width]: gate half, then up half
  for (int t = 0; t < tokens; ++t) {
    for (int i = 0; i < width; ++i) {
      gate_up[size_t(t) * 2 * width + i] = gate[size_t(t) * width + i];
      gate_up[size_t(t) * 2 * width + width + i] = up[size_t(t) * width + i];
    }
  }
  DeviceBuffer<T> d_gate(n + offset), d_up(n + offset), d_out(n + offset);
  DeviceBuffer<T> d_gate_up(2 * n + offset);
  std::copy(gate.begin(), gate.end(), d_gate.get() + offset);
  std::copy(up.begin(), up.end(), d_up.get() + offset);
  std::copy(gate_up.begin(), gate_up.end(), d_gate_up.get() + offset);
  const T* g = d_gate.get() + offset;
  const T* u = d_up.get() + offset;
  T* out = layout == Layout::kInPlace ? d_gate.get() + offset : d_out.get() + offset;

  simt::TestLauncher launcher(schedule);
  if (layout == Layout::kFused) {
    const T* fused = d_gate_up.get() + offset;
    const bool vector = offset == 0 && width % kVec16<T> == 0;
    EXPECT_EQ(SwiGluVectorizable(fused, fused + width, out, int64_t{2} * width,
                                 int64_t{2} * width, int64_t{width}, width),
              vector);
    ASSERT_TRUE(LaunchSwiGluFused(launcher, fused, out, tokens, width).ok());
  } else {
    ASSERT_TRUE(LaunchSwiGlu(launcher, g, u, out, tokens, width).ok());
  }

  std::vector<float> expected(n);
  kernels::cpu::reference::SwiGlu(simt::ToFloats<T>(gate), simt::ToFloats<T>(up), expected);
  for (size_t i = 0; i < n; ++i) {
    const float got = simt::AsFloat(out[i]);
    ASSERT_NEAR(got, expected[i], RelativeTolerance<T>() * std::fabs(expected[i]) + 1e-6f)
        << "layout " << static_cast<int>(layout) << " tokens=" << tokens << " width=" << width
        << " offset=" << offset << " i=" << i << " gate=" << simt::AsFloat(gate[i]);
  }
}

class SwiGluKernelTest : public simt::KernelTest {};

TEST_P(SwiGluKernelTest, MatchesReferenceInEveryLayout) {
  std::mt19937 rng(555);
  for (Layout layout : {Layout::kFused, Layout::kSeparate, Layout::kInPlace}) {
    for (auto [tokens, width] :
         {std::pair{1, 16}, {3, 97}, {17, 64}, {1, 1}, {3, 15}, {2, 17}, {3, 576}, {1, 1536}}) {
      for (int offset : {0, 1}) {
        CheckSwiGlu<__nv_bfloat16>(GetParam(), layout, tokens, width, offset, rng);
        CheckSwiGlu<__half>(GetParam(), layout, tokens, width, offset, rng);
        CheckSwiGlu<float>(GetParam(), layout, tokens, width, offset, rng);
      }
    }
  }
}

TEST(SwiGluVectorizableTest, NeedsAlignedPointersStridesAndWidth) {
  alignas(16) __nv_bfloat16 buffer[64];
  EXPECT_TRUE(SwiGluVectorizable<__nv_bfloat16>(buffer, buffer + 16, buffer + 32, 32, 32, 16, 16));
  EXPECT_FALSE(SwiGluVectorizable<__nv_bfloat16>(buffer + 1, buffer + 16, buffer + 32, 32, 32, 16, 16));
  EXPECT_FALSE(SwiGluVectorizable<__nv_bfloat16>(buffer, buffer + 16, buffer + 32, 36, 32, 16, 16));
  EXPECT_FALSE(SwiGluVectorizable<__nv_bfloat16>(buffer, buffer + 16, buffer + 32, 32, 32, 16, 12));
  EXPECT_TRUE(SwiGluVectorizable<float>(reinterpret_cast<float*>(buffer), reinterpret_cast<float*>(buffer) + 4,
                                        reinterpret_cast<float*>(buffer) + 8, 4, 4, 4, 4));
}

INSTANTIATE_TEST_SUITE_P(Schedules, SwiGluKernelTest, ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
