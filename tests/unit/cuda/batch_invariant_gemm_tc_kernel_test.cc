// Batch-invariant GEMM on tensor cores (batch_invariant_gemm_tc.cuh), on the emulator under every
// test schedule (and on a GPU, where the invariance is the hardware's to keep):
//   - both tile configurations against the f64 CPU reference with a tolerance, on awkward shapes
//     (m across the narrow/wide boundary and past a 128-row tile, n not a multiple of 8 or of a
//     tile, k a multiple of 8 but not of 16, of a k tile or of a stage count);
//   - the invariance: every row of the narrow configuration's C equals the wide one's bit for
//     bit (rows alone, in other batches and positions, and across schedules:
//     batch_invariant_gemm_kernel_test.cc, through the dispatcher);
//   - the dispatcher: 16-bit types with k % 8 == 0 take this path (a CUDA-core chain's bits are
//     not an mma chain's), other depths the CUDA-core chain, and a misaligned matrix is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cuda/batch_invariant_gemm.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;
using simt::SameBits;

enum class Path { kNarrow, kWide, kDispatch };

template <typename T, typename TC>
std::vector<TC> RunGemm(const simt::Schedule& schedule, Path path, const std::vector<T>& a,
                        const std::vector<T>& b, int m, int n, int k) {
  DeviceBuffer<T> d_a{std::span<const T>(a)};
  DeviceBuffer<T> d_b{std::span<const T>(b)};
  DeviceBuffer<TC> d_c(size_t(m) * n);
  for (size_t i = 0; i < d_c.size(); ++i) d_c[i] = simt::FloatTo<TC>(7.0f);  // overwritten
  simt::TestLauncher launcher(schedule);
  const T* pa = d_a.get();
  const T* pb = d_b.get();
  const auto status =
      path == Path::kNarrow
          ? LaunchBatchInvariantGemmTc<InvariantTcNarrow>(launcher, pa, pb, d_c.get(), m, n, k)
      : path == Path::kWide
          ? LaunchBatchInvariantGemmTc<InvariantTcWide>(launcher, pa, pb, d_c.get(), m, n, k)
          : LaunchBatchInvariantGemm(launcher, pa, pb, d_c.get(), m, n, k);
  EXPECT_TRUE(status.ok()) << status;
  return d_c.ToHost();
}

template <typename TC>
float RoundingOfC() {
  if constexpr (std::is_same_v<TC, float>) return 0.0f;
  if constexpr (std::is_same_v<TC, __half>) return 1.0f / 1024;
  return 1.0f / 128;
}

template <typename T, typename TC>
void ExpectNearReference(const std::vector<T>& a, const std::vector<T>& b,
                         const std::vector<TC>& c, int m, int n, int k, const char* what) {
  for (int row = 0; row < m; ++row) {
    for (int col = 0; col < n; ++col) {
      double exact = 0, magnitude = 0;
      for (int i = 0; i < k; ++i) {
        const double term = double(simt::AsFloat(a[size_t(row) * k + i])) *
                            simt::AsFloat(b[size_t(col) * k + i]);
        exact += term;
        magnitude += std::fabs(term);
      }
      // f32 accumulation per k16 step (k / 16 roundings of the running magnitude; tensor cores
      // may truncate inside a step: 2^-22 per step) + one rounding to TC.
      const double tolerance =
          4e-7 * (k / 16 + 2) * magnitude + RoundingOfC<TC>() * std::fabs(exact) + 1e-30;
      ASSERT_NEAR(simt::AsFloat(c[size_t(row) * n + col]), exact, tolerance)
          << what << ": m " << m << " n " << n << " k " << k << " at " << row << "," << col;
    }
  }
}

template <typename T, typename TC>
void CheckShape(const simt::Schedule& schedule, int m, int n, int k, std::mt19937& rng) {
  const std::vector<T> a = simt::Convert<T>(simt::RandomFloats(size_t(m) * k, rng, -2, 2));
  const std::vector<T> b = simt::Convert<T>(simt::RandomFloats(size_t(n) * k, rng, -1, 1));
  const std::vector<TC> narrow = RunGemm<T, TC>(schedule, Path::kNarrow, a, b, m, n, k);
  const std::vector<TC> wide = RunGemm<T, TC>(schedule, Path::kWide, a, b, m, n, k);
  ExpectNearReference(a, b, narrow, m, n, k, "narrow");
  ExpectNearReference(a, b, wide, m, n, k, "wide");
  ASSERT_EQ(std::memcmp(narrow.data(), wide.data(), narrow.size() * sizeof(TC)), 0)
      << "the configurations disagree: m " << m << " n " << n << " k " << k;
}

class BatchInvariantGemmTcKernelTest : public simt::KernelTest {};

TEST_P(BatchInvariantGemmTcKernelTest, Bf16BothConfigurationsMatchReferenceAndEachOther) {
  std::mt19937 rng(71);
  for (auto [m, n, k] : {std::tuple{1, 33, 8}, {3, 70, 24}, {16, 8, 136}, {17, 1, 40},
                         {5, 65, 264}, {130, 33, 24}}) {
    CheckShape<__nv_bfloat16, __nv_bfloat16>(GetParam(), m, n, k, rng);
    CheckShape<__nv_bfloat16, float>(GetParam(), m, n, k, rng);
  }
}

TEST_P(BatchInvariantGemmTcKernelTest, F16MatchesReference) {
  std::mt19937 rng(72);
  for (auto [m, n, k] : {std::tuple{2, 31, 136}, {19, 9, 40}}) {
    CheckShape<__half, __half>(GetParam(), m, n, k, rng);
    CheckShape<__half, float>(GetParam(), m, n, k, rng);
  }
}

class BatchInvariantGemmTcInvarianceTest : public simt::SingleKernelTest {};

// The dispatcher's rule: the tensor-core path for 16-bit types at k % 8 == 0 (its bits are the
// wide configuration's, and differ from the CUDA-core chain's somewhere), the chain otherwise.
TEST_F(BatchInvariantGemmTcInvarianceTest, DispatchFollowsTypeAndDepthOnly) {
  using T = __nv_bfloat16;
  const simt::Schedule schedule = simt::TestSchedules().front();
  std::mt19937 rng(74);
  constexpr int kM = 20, kN = 24, kK = 264;
  const std::vector<T> a = simt::Convert<T>(simt::RandomFloats(size_t(kM) * kK, rng, -2, 2));
  const std::vector<T> b = simt::Convert<T>(simt::RandomFloats(size_t(kN) * kK, rng, -1, 1));
  const std::vector<float> dispatched = RunGemm<T, float>(schedule, Path::kDispatch, a, b, kM, kN, kK);
  const std::vector<float> wide = RunGemm<T, float>(schedule, Path::kWide, a, b, kM, kN, kK);
  EXPECT_EQ(std::memcmp(dispatched.data(), wide.data(), wide.size() * sizeof(float)), 0);
  int differs = 0;
  for (int row = 0; row < kM; ++row) {
    for (int col = 0; col < kN; ++col) {
      float chain = 0.0f;
      for (int i = 0; i < kK; ++i) {
        chain = std::fma(simt::AsFloat(a[size_t(row) * kK + i]),
                         simt::AsFloat(b[size_t(col) * kK + i]), chain);
      }
      differs += SameBits(chain, dispatched[size_t(row) * kN + col]) ? 0 : 1;
    }
  }
  EXPECT_GT(differs, 0) << "every element equals the CUDA-core chain: is the dispatcher taking "
                           "the tensor cores at all?";
}

// Named *LaunchError*: the GPU kit's sanitizer run leaves out launches that fail on purpose.
TEST_F(BatchInvariantGemmTcInvarianceTest, MisalignedMatrixIsALaunchError) {
  using T = __nv_bfloat16;
  DeviceBuffer<T> a(8 * 17), b(8 * 16);
  DeviceBuffer<float> c(16);
  simt::TestLauncher launcher(simt::TestSchedules().front());
  // a + 1: 2 bytes past a 16-byte boundary; k = 8 takes the tensor-core path.
  const auto status = LaunchBatchInvariantGemm(launcher, static_cast<const T*>(a.get() + 1),
                                               static_cast<const T*>(b.get()), c.get(), 1, 16, 8);
  EXPECT_FALSE(status.ok());
}

INSTANTIATE_TEST_SUITE_P(Schedules, BatchInvariantGemmTcKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
