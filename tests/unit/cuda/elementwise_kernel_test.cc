// Elementwise kernels (elementwise.cuh) on the emulator vs their CPU references, bit for bit
// (both add in f32 and round once to T): bf16, f16 and f32; counts and widths that are not a
// multiple of the 16-byte vector (tails), and pointers offset by one element (the scalar path);
// under every test schedule. The column-group copy is checked as the model ops use it: a row of
// `groups` groups of parts split into outputs at column offsets (SplitHeads, worker/models/
// model_ops.h), against the cpu backend's loop; SigmoidMul against the cpu backend's expression.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/cuda/elementwise.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

using simt::SameBits;

// A device copy of `values` starting `offset` elements into its allocation (offset 1 breaks
// 16-byte alignment; the data still ends at the guard page).
template <typename T>
struct OffsetBuffer {
  DeviceBuffer<T> buffer;
  int offset;
  OffsetBuffer(const std::vector<T>& values, int offset_in)
      : buffer(values.size() + offset_in), offset(offset_in) {
    std::memcpy(buffer.get() + offset, values.data(), values.size() * sizeof(T));
  }
  T* get() { return buffer.get() + offset; }
  T at(size_t i) { return buffer[offset + i]; }
};

template <typename T>
void CheckAddInPlace(const simt::Schedule& schedule, int64_t count, int offset,
                     std::mt19937& rng) {
  const std::vector<T> a = simt::Convert<T>(simt::RandomFloats(count, rng, -4, 4));
  const std::vector<T> b = simt::Convert<T>(simt::RandomFloats(count, rng, -4, 4));
  OffsetBuffer<T> d_a(a, offset), d_b(b, offset);
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(LaunchAddInPlace(launcher, d_a.get(), static_cast<const T*>(d_b.get()), count).ok());
  for (int64_t i = 0; i < count; ++i) {
    const T expected = simt::FloatTo<T>(simt::AsFloat(a[i]) + simt::AsFloat(b[i]));
    ASSERT_TRUE(SameBits(d_a.at(i), expected)) << "count " << count << " offset " << offset
                                               << " i " << i;
  }
}

template <typename T>
void CheckAddBias(const simt::Schedule& schedule, int rows, int width, int offset,
                  std::mt19937& rng) {
  const std::vector<T> x = simt::Convert<T>(simt::RandomFloats(size_t(rows) * width, rng, -4, 4));
  const std::vector<T> bias = simt::Convert<T>(simt::RandomFloats(width, rng, -4, 4));
  OffsetBuffer<T> d_x(x, offset), d_bias(bias, offset);
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(
      LaunchAddBias(launcher, d_x.get(), static_cast<const T*>(d_bias.get()), rows, width).ok());
  for (size_t i = 0; i < x.size(); ++i) {
    const T expected = simt::FloatTo<T>(simt::AsFloat(x[i]) + simt::AsFloat(bias[i % width]));
    ASSERT_TRUE(SameBits(d_x.at(i), expected))
        << "rows " << rows << " width " << width << " offset " << offset << " i " << i;
  }
}

template <typename T>
void CheckGatherRows(const simt::Schedule& schedule, int src_rows, int num_rows, int width,
                     int offset, std::mt19937& rng) {
  const std::vector<T> src =
      simt::Convert<T>(simt::RandomFloats(size_t(src_rows) * width, rng, -4, 4));
  std::uniform_int_distribution<int32_t> pick(0, src_rows - 1);
  std::vector<int32_t> indices(num_rows);
  for (int32_t& index : indices) index = pick(rng);
  if (num_rows > 0) indices.back() = src_rows - 1;  // the last source row (guard page)
  OffsetBuffer<T> d_src(src, offset), d_dst(std::vector<T>(size_t(num_rows) * width), offset);
  DeviceBuffer<int32_t> d_indices{std::span<const int32_t>(indices)};
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(LaunchGatherRows(launcher, static_cast<const T*>(d_src.get()),
                               static_cast<const int32_t*>(d_indices.get()), d_dst.get(),
                               num_rows, width)
                  .ok());
  for (int r = 0; r < num_rows; ++r) {
    for (int c = 0; c < width; ++c) {
      ASSERT_TRUE(SameBits(d_dst.at(size_t(r) * width + c), src[size_t(indices[r]) * width + c]))
          << "width " << width << " offset " << offset << " row " << r << " col " << c;
    }
  }
}

// SplitHeads of rows [groups x (w0 | w1 | w2)] into three outputs: part p to out_p (width
// out_width[p], group g at column offset[p] + g * w_p). Part 2 lands at an offset inside a wider
// output (columns before it stay untouched).
template <typename T>
void CheckSplitHeads(const simt::Schedule& schedule, int rows, int groups,
                     const std::array<int, 3>& widths, std::mt19937& rng) {
  const int group_width = widths[0] + widths[1] + widths[2];
  const std::array<int, 3> offset = {0, 0, 5};
  std::array<int, 3> out_width{};
  for (int p = 0; p < 3; ++p) out_width[p] = offset[p] + groups * widths[p];
  const std::vector<T> in =
      simt::Convert<T>(simt::RandomFloats(size_t(rows) * groups * group_width, rng, -4, 4));
  DeviceBuffer<T> d_in{std::span<const T>(in)};
  std::array<std::vector<T>, 3> expected;
  std::vector<std::unique_ptr<DeviceBuffer<T>>> d_out;  // not movable
  for (int p = 0; p < 3; ++p) {
    expected[p] = simt::Convert<T>(simt::RandomFloats(size_t(rows) * out_width[p], rng, -4, 4));
    d_out.push_back(std::make_unique<DeviceBuffer<T>>(std::span<const T>(expected[p])));
  }
  for (int r = 0; r < rows; ++r) {  // the cpu backend's SplitHeads loop
    const T* row = in.data() + size_t(r) * groups * group_width;
    for (int g = 0; g < groups; ++g) {
      for (int p = 0; p < 3; ++p) {
        std::copy_n(row, widths[p],
                    expected[p].data() + size_t(r) * out_width[p] + offset[p] + g * widths[p]);
        row += widths[p];
      }
    }
  }
  simt::TestLauncher launcher(schedule);
  int part_offset = 0;
  for (int p = 0; p < 3; ++p) {
    ASSERT_TRUE(LaunchCopyColumnGroups(launcher, static_cast<const T*>(d_in.get()) + part_offset,
                                       int64_t{groups} * group_width, int64_t{group_width},
                                       d_out[p]->get() + offset[p], int64_t{out_width[p]},
                                       int64_t{widths[p]}, rows, groups, widths[p])
                    .ok());
    part_offset += widths[p];
  }
  for (int p = 0; p < 3; ++p) {
    for (size_t i = 0; i < expected[p].size(); ++i) {
      ASSERT_TRUE(SameBits((*d_out[p])[i], expected[p][i]))
          << "rows " << rows << " groups " << groups << " part " << p << " i " << i;
    }
  }
}

// Relative bound of SigmoidMul on a GPU against the host expression: one ulp of T (2^-8 bf16,
// 2^-11 f16 plus rounding; 2^-20 for f32: expf's 2 ulp through the division and product).
template <typename T>
float SigmoidMulGpuTolerance() {
  if (std::is_same_v<T, float>) return 0x1p-20f;
  return std::is_same_v<T, __half> ? 0x1p-10f : 0x1p-7f;
}

// The spacing of T's subnormals: the absolute error one rounding of a tiny result can have.
template <typename T>
float SmallestStep() {
  if (std::is_same_v<T, float>) return 0x1p-149f;
  return std::is_same_v<T, __half> ? 0x1p-24f : 0x1p-133f;
}

template <typename T>
void CheckSigmoidMul(const simt::Schedule& schedule, int64_t count, std::mt19937& rng) {
  const std::vector<T> gate = simt::Convert<T>(simt::RandomFloats(count, rng, -12, 12));
  const std::vector<T> x = simt::Convert<T>(simt::RandomFloats(count, rng, -4, 4));
  DeviceBuffer<T> d_gate{std::span<const T>(gate)}, d_x{std::span<const T>(x)};
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(
      LaunchSigmoidMul(launcher, static_cast<const T*>(d_gate.get()), d_x.get(), count).ok());
  for (int64_t i = 0; i < count; ++i) {  // the cpu backend's SigmoidMul expression
    const float sigmoid = 1.0f / (1.0f + std::exp(-simt::AsFloat(gate[i])));
    const float exact = simt::AsFloat(x[i]) * sigmoid;
    const T expected = simt::FloatTo<T>(exact);
    if (!TESSERA_KERNEL_TEST_ON_GPU) {  // the emulator's expf is the host's: the same bits
      ASSERT_TRUE(SameBits(d_x[i], expected)) << "count " << count << " i " << i;
      continue;
    }
    // A GPU's expf is within 2 ulp (CUDA C++ Programming Guide, mathematical functions), so
    // the f32 result is within a few f32 ulp and a 16-bit one within one of its own ulp (one
    // subnormal step for a tiny result).
    EXPECT_NEAR(simt::AsFloat(d_x[i]), exact,
                SigmoidMulGpuTolerance<T>() * std::fabs(exact) + SmallestStep<T>())
        << "count " << count << " i " << i;
  }
}

template <typename T>
void CheckAll(const simt::Schedule& schedule, std::mt19937& rng) {
  for (auto [rows, groups] : {std::pair{1, 1}, {3, 2}, {17, 4}}) {
    CheckSplitHeads<T>(schedule, rows, groups, {1, 3, 2}, rng);
    CheckSplitHeads<T>(schedule, rows, groups, {16, 16, 7}, rng);
  }
  for (int64_t count : {1, 15, 16, 17, 97}) CheckSigmoidMul<T>(schedule, count, rng);
  for (int offset : {0, 1}) {
    for (int64_t count : {1, 7, 8, 9, 1003}) CheckAddInPlace<T>(schedule, count, offset, rng);
    for (auto [rows, width] : {std::pair{1, 1}, {3, 8}, {5, 17}, {4, 64}, {2, 130}}) {
      CheckAddBias<T>(schedule, rows, width, offset, rng);
    }
    for (auto [rows, width] : {std::pair{1, 1}, {3, 8}, {5, 17}, {4, 64}, {2, 130}}) {
      CheckGatherRows<T>(schedule, 7, rows, width, offset, rng);
    }
  }
}

class ElementwiseKernelTest : public simt::KernelTest {};

TEST_P(ElementwiseKernelTest, Bf16MatchesReference) {
  std::mt19937 rng(71);
  CheckAll<__nv_bfloat16>(GetParam(), rng);
}
TEST_P(ElementwiseKernelTest, F16MatchesReference) {
  std::mt19937 rng(72);
  CheckAll<__half>(GetParam(), rng);
}
TEST_P(ElementwiseKernelTest, F32MatchesReference) {
  std::mt19937 rng(73);
  CheckAll<float>(GetParam(), rng);
}

// A large count strides: more vectors than kElementwiseMaxBlocks x kElementwiseThreads.
TEST_P(ElementwiseKernelTest, GridStrideCoversLargeCounts) {
  std::mt19937 rng(74);
  CheckAddInPlace<float>(GetParam(), int64_t{4} * kElementwiseMaxBlocks * kElementwiseThreads + 5,
                         0, rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, ElementwiseKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
