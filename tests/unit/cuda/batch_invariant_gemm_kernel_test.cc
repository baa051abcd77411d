// Batch-invariant GEMM (batch_invariant_gemm.cuh) on the emulator, under every test schedule:
//   - against the f64 CPU reference with a tolerance, on awkward shapes (m in {1, 3, 17, 65},
//     n in {1, 31, 129}, k in {1, 15, 33, 130}; the full cross product for bf16 -> bf16, a
//     subset for the other type combinations);
//   - bit for bit against the host loop acc = fma(a, b, acc) in k order (the kernel's
//     documented reduction order), which makes every element independent of m, n and its tile;
//   - the invariance itself, through the dispatcher on both paths (CUDA cores at k = 130, tensor
//     cores at k = 280): row i of C computed with m = 1, with m = 37 and at row 70 of m = 75
//     (another tile row and position), and columns computed from a slice of B, are bitwise equal;
//     C is bitwise identical across schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/batch_invariant_gemm.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

using simt::SameBits;

template <typename TA, typename TB, typename TC>
std::vector<TC> RunGemm(const simt::Schedule& schedule, const std::vector<TA>& a,
                        const std::vector<TB>& b, int m, int n, int k) {
  DeviceBuffer<TA> d_a{std::span<const TA>(a)};
  DeviceBuffer<TB> d_b{std::span<const TB>(b)};
  DeviceBuffer<TC> d_c(size_t(m) * n);
  for (size_t i = 0; i < d_c.size(); ++i) d_c[i] = simt::FloatTo<TC>(7.0f);  // overwritten
  simt::TestLauncher launcher(schedule);
  const auto status =
      LaunchBatchInvariantGemm(launcher, static_cast<const TA*>(d_a.get()),
                               static_cast<const TB*>(d_b.get()), d_c.get(), m, n, k);
  EXPECT_TRUE(status.ok()) << status;
  return d_c.ToHost();
}

// The kernel's reduction order on the host: one f32 fused multiply-add per k, in k order.
template <typename TA, typename TB, typename TC>
TC SequentialFma(const std::vector<TA>& a, const std::vector<TB>& b, int row, int col, int k) {
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) {
    acc = std::fma(simt::AsFloat(a[size_t(row) * k + i]), simt::AsFloat(b[size_t(col) * k + i]),
                   acc);
  }
  return simt::FloatTo<TC>(acc);
}

template <typename TC>
float RoundingOfC() {
  if constexpr (std::is_same_v<TC, float>) return 0.0f;
  if constexpr (std::is_same_v<TC, __half>) return 1.0f / 1024;
  return 1.0f / 128;
}

template <typename TA, typename TB, typename TC>
void CheckGemm(const simt::Schedule& schedule, int m, int n, int k, std::mt19937& rng) {
  const std::vector<TA> a = simt::Convert<TA>(simt::RandomFloats(size_t(m) * k, rng, -2, 2));
  const std::vector<TB> b = simt::Convert<TB>(simt::RandomFloats(size_t(n) * k, rng, -1, 1));
  const std::vector<TC> c = RunGemm<TA, TB, TC>(schedule, a, b, m, n, k);
  for (int row = 0; row < m; ++row) {
    for (int col = 0; col < n; ++col) {
      double exact = 0, magnitude = 0;
      for (int i = 0; i < k; ++i) {
        const double term = double(simt::AsFloat(a[size_t(row) * k + i])) *
                            simt::AsFloat(b[size_t(col) * k + i]);
        exact += term;
        magnitude += std::fabs(term);
      }
      const TC got = c[size_t(row) * n + col];
      // f32 accumulation (k roundings of at most 2^-24 of the running magnitude) + one rounding.
      const double tolerance = 1e-6 * k * magnitude + RoundingOfC<TC>() * std::fabs(exact) + 1e-30;
      ASSERT_NEAR(simt::AsFloat(got), exact, tolerance)
          << "m " << m << " n " << n << " k " << k << " at " << row << "," << col;
      ASSERT_TRUE(SameBits(got, SequentialFma<TA, TB, TC>(a, b, row, col, k)))
          << "not the k-ordered fma chain: m " << m << " n " << n << " k " << k << " at " << row
          << "," << col;
    }
  }
}

class BatchInvariantGemmKernelTest : public simt::KernelTest {};

TEST_P(BatchInvariantGemmKernelTest, Bf16MatchesReferenceAtAwkwardShapes) {
  std::mt19937 rng(61);
  for (int m : {1, 3, 17, 65}) {
    for (int n : {1, 31, 129}) {
      for (int k : {1, 15, 33, 130}) {
        CheckGemm<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16>(GetParam(), m, n, k, rng);
      }
    }
  }
}

TEST_P(BatchInvariantGemmKernelTest, OtherTypesMatchReference) {
  std::mt19937 rng(62);
  for (auto [m, n, k] : {std::tuple{1, 129, 130}, {17, 31, 33}, {65, 1, 15}, {3, 129, 1}}) {
    CheckGemm<__nv_bfloat16, __nv_bfloat16, float>(GetParam(), m, n, k, rng);
    CheckGemm<__half, __half, __half>(GetParam(), m, n, k, rng);
    CheckGemm<__half, __half, float>(GetParam(), m, n, k, rng);
    CheckGemm<float, float, float>(GetParam(), m, n, k, rng);
  }
}

class BatchInvariantGemmInvarianceTest : public simt::SingleKernelTest {};

// Rows [first, first + count) of `a` ([*, k]) placed at row `at` of an otherwise random [m, k].
template <typename T>
std::vector<T> Embed(const std::vector<T>& a, int first, int count, int k, int m, int at,
                     std::mt19937& rng) {
  std::vector<T> out = simt::Convert<T>(simt::RandomFloats(size_t(m) * k, rng, -2, 2));
  std::copy_n(a.begin() + size_t(first) * k, size_t(count) * k, out.begin() + size_t(at) * k);
  return out;
}

// Depth k = 130 takes the CUDA-core chain; k = 280 the tensor cores (two wide k tiles and half a
// k16 step short; m = 1 the narrow tile, m = 37 and 75 the wide one).
void CheckRowsInvariant(int kK) {
  using T = __nv_bfloat16;
  constexpr int kM = 37, kN = 129;
  SCOPED_TRACE("k " + std::to_string(kK));
  std::mt19937 rng(63);
  const std::vector<T> a = simt::Convert<T>(simt::RandomFloats(size_t(kM) * kK, rng, -2, 2));
  const std::vector<T> b = simt::Convert<T>(simt::RandomFloats(size_t(kN) * kK, rng, -1, 1));
  const std::vector<simt::Schedule> schedules = simt::TestSchedules();
  const std::vector<float> batched = RunGemm<T, T, float>(schedules.front(), a, b, kM, kN, kK);
  for (const simt::Schedule& schedule : schedules) {  // identical under every schedule
    const std::vector<float> again = RunGemm<T, T, float>(schedule, a, b, kM, kN, kK);
    ASSERT_EQ(std::memcmp(again.data(), batched.data(), again.size() * sizeof(float)), 0)
        << schedule.ToString();
  }
  for (int row : {0, 17, 36}) {
    const std::vector<float> alone =
        RunGemm<T, T, float>(schedules.back(), Embed(a, row, 1, kK, 1, 0, rng), b, 1, kN, kK);
    const std::vector<float> elsewhere =
        RunGemm<T, T, float>(schedules.back(), Embed(a, row, 1, kK, 75, 70, rng), b, 75, kN, kK);
    for (int col = 0; col < kN; ++col) {
      const float expected = batched[size_t(row) * kN + col];
      ASSERT_TRUE(SameBits(alone[col], expected)) << "m=1, row " << row << " col " << col;
      ASSERT_TRUE(SameBits(elsewhere[size_t(70) * kN + col], expected))
          << "row 70 of m=75, row " << row << " col " << col;
    }
  }
  // Columns from a slice of B (another n, another tile column) are the same bits too.
  constexpr int kFirst = 40, kCount = 31;
  const std::vector<T> b_slice(b.begin() + size_t(kFirst) * kK,
                               b.begin() + size_t(kFirst + kCount) * kK);
  const std::vector<float> sliced =
      RunGemm<T, T, float>(schedules.front(), a, b_slice, kM, kCount, kK);
  for (int row = 0; row < kM; ++row) {
    for (int col = 0; col < kCount; ++col) {
      ASSERT_TRUE(SameBits(sliced[size_t(row) * kCount + col],
                           batched[size_t(row) * kN + kFirst + col]))
          << "n slice, row " << row << " col " << col;
    }
  }
}

TEST_F(BatchInvariantGemmInvarianceTest, RowsAreBitIdenticalWhateverTheBatch) {
  CheckRowsInvariant(130);
  CheckRowsInvariant(280);
}

TEST_F(BatchInvariantGemmInvarianceTest, EmptyReductionWritesZeros) {
  const std::vector<float> unread(1, 1.0f);  // k = 0: A and B are not read
  const std::vector<float> c =
      RunGemm<float, float, float>(simt::TestSchedules().front(), unread, unread, 3, 5, 0);
  for (float value : c) EXPECT_EQ(value, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Schedules, BatchInvariantGemmKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
