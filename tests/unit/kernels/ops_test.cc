// RMSNorm, RoPE, SwiGLU and softmax against the f64 references.
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::AllNear;
using testing::BitEqual;
using testing::RandomVector;

constexpr int64_t kAwkward[] = {1, 3, 15, 16, 17, 97, 576};

TEST(CpuRmsNormTest, MatchesReference) {
  for (int64_t d : kAwkward) {
    for (int64_t m : {1, 3, 17}) {
      const auto x = RandomVector(m * d, d * 100 + m, -3.0f, 3.0f);
      const auto w = RandomVector(d, d + 7, 0.5f, 1.5f);
      std::vector<float> y(m * d), ref(m * d);
      RmsNorm(x, w, 1e-5f, m, y);
      reference::RmsNorm(x, w, 1e-5f, m, ref);
      ASSERT_TRUE(AllNear(y, ref, 1e-6, 2e-6)) << "d=" << d << " m=" << m;
    }
  }
}

TEST(CpuRmsNormTest, InPlaceAndRowIndependent) {
  const int64_t d = 576;
  const auto x = RandomVector(5 * d, 1);
  const auto w = RandomVector(d, 2);
  std::vector<float> out(5 * d), in_place = x, single(d);
  RmsNorm(x, w, 1e-5f, 5, out);
  RmsNorm(in_place, w, 1e-5f, 5, in_place);
  EXPECT_TRUE(BitEqual(out, in_place));
  RmsNorm({x.data() + 3 * d, static_cast<size_t>(d)}, w, 1e-5f, 1, single);
  EXPECT_TRUE(BitEqual({out.data() + 3 * d, static_cast<size_t>(d)}, single));
}

TEST(CpuRmsNormTest, ZeroRowGivesZeros) {
  std::vector<float> x(16, 0.0f), w(16, 1.0f), y(16, 1.0f);
  RmsNorm(x, w, 1e-5f, 1, y);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(CpuRopeTest, MatchesReference) {
  const RopeTable table(64, 100000.0f, 4096);
  for (int num_heads : {1, 3, 9}) {
    for (int num_tokens : {1, 3, 17}) {
      std::vector<int32_t> positions(num_tokens);
      for (int t = 0; t < num_tokens; ++t) positions[t] = (t * 613 + num_heads) % 4096;
      auto x = RandomVector(num_tokens * num_heads * 64, num_tokens * 10 + num_heads);
      auto ref = x;
      ApplyRope(table, positions, num_heads, 64, x);
      reference::Rope(positions, num_heads, 64, 64, 100000.0, ref);
      // ggml's incremental f32 angles drift by ~ pair-index ulps of pos (up to ~4e3 rad here).
      ASSERT_TRUE(AllNear(x, ref, 3e-3)) << num_heads << " heads, " << num_tokens << " tokens";
    }
  }
}

TEST(CpuRopeTest, SmallPositionsAreAccurate) {
  const RopeTable table(64, 10000.0f, 64);
  std::vector<int32_t> positions(64);
  for (int t = 0; t < 64; ++t) positions[t] = t;
  auto x = RandomVector(64 * 2 * 64, 5);
  auto ref = x;
  ApplyRope(table, positions, 2, 64, x);
  reference::Rope(positions, 2, 64, 64, 10000.0, ref);
  EXPECT_TRUE(AllNear(x, ref, 2e-5));
}

TEST(CpuRopeTest, PartialRotaryLeavesTailAndRotatesAdjacentPairs) {
  const RopeTable table(4, 10000.0f, 8);
  std::vector<float> x = {1, 0, 1, 0, 5, 6};  // head_dim 6, rope_dim 4
  const std::vector<int32_t> pos = {1};
  ApplyRope(table, pos, 1, 6, x);
  // Pair 0 rotates by 1 rad, pair 1 by 1 * 10000^(-2/4) = 0.01 rad.
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[2], std::cos(0.01), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.01), 1e-6);
  EXPECT_EQ(x[4], 5.0f);
  EXPECT_EQ(x[5], 6.0f);
}

// The table replicates ggml_rope_cache_init's float recurrence exactly.
TEST(CpuRopeTest, TableMatchesGgmlRecurrence) {
  const RopeTable table(64, 100000.0f, 300);
  const float theta_scale = std::pow(100000.0f, -2.0f / 64.0f);
  for (int pos : {0, 1, 7, 299}) {
    float theta = static_cast<float>(pos);
    const float* cs = table.CosSin(pos);
    for (int i = 0; i < 32; ++i) {
      ASSERT_EQ(cs[2 * i], std::cos(theta)) << pos << " " << i;
      ASSERT_EQ(cs[2 * i + 1], std::sin(theta)) << pos << " " << i;
      theta *= theta_scale;
    }
  }
}

class CpuVectorOpsTest : public ::testing::TestWithParam<Isa> {};

TEST_P(CpuVectorOpsTest, SwiGluMatchesReference) {
  for (int64_t n : kAwkward) {
    const auto gate = RandomVector(n, n, -12.0f, 12.0f);
    const auto up = RandomVector(n, n + 1, -2.0f, 2.0f);
    std::vector<float> out(n), ref(n);
    SwiGlu(gate, up, out, GetParam());
    reference::SwiGlu(gate, up, ref);
    ASSERT_TRUE(AllNear(out, ref, 1e-6, 1e-6)) << "n=" << n;
  }
}

TEST_P(CpuVectorOpsTest, SwiGluExtremes) {
  const std::vector<float> gate = {-100.0f, -88.5f, 0.0f, 88.5f, 100.0f};
  const std::vector<float> up(5, 1.0f);
  std::vector<float> out(5);
  SwiGlu(gate, up, out, GetParam());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 0.0f, 1e-30);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 88.5f);
  EXPECT_EQ(out[4], 100.0f);
}

TEST_P(CpuVectorOpsTest, SoftmaxAndLogSoftmaxMatchReference) {
  for (int64_t n : {1, 3, 15, 16, 17, 97, 49152}) {
    const auto x = RandomVector(n, n, -20.0f, 20.0f);
    std::vector<float> p = x, logp = x, ref_p(n), ref_logp(n);
    SoftmaxInPlace(p, GetParam());
    LogSoftmaxInPlace(logp, GetParam());
    reference::Softmax(x, ref_p);
    reference::LogSoftmax(x, ref_logp);
    ASSERT_TRUE(AllNear(p, ref_p, 1e-9, 1e-5)) << "n=" << n;
    ASSERT_TRUE(AllNear(logp, ref_logp, 1e-4, 1e-6)) << "n=" << n;
    double lse = 0;
    for (float v : x) lse += std::exp(double{v});
    EXPECT_NEAR(LogSumExp(x, GetParam()), std::log(lse), 1e-4) << "n=" << n;
  }
}

TEST_P(CpuVectorOpsTest, SoftmaxHandlesMinusInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, 0.0f, -inf, std::log(3.0f)};
  SoftmaxInPlace(x, GetParam());
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_NEAR(x[1], 0.25f, 1e-6);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_NEAR(x[3], 0.75f, 1e-6);
  const std::vector<float> all_masked = {-inf, -inf};
  EXPECT_EQ(LogSumExp(all_masked, GetParam()), -inf);
}

TEST_P(CpuVectorOpsTest, ExpShiftMatchesStdExp) {
  std::vector<float> x;
  for (float v = -90.0f; v <= 88.0f; v += 0.173f) x.push_back(v);
  std::vector<float> e = x;
  ExpShiftInPlace(e, 0.0f, GetParam());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(double{x[i]});
    if (x[i] < -87.33f) {
      EXPECT_EQ(e[i], 0.0f);
    } else {
      EXPECT_NEAR(e[i], want, want * 4e-7) << x[i];  // ~3 ulp
    }
  }
}

TEST(CpuVectorOpsIsaTest, Avx2AndAvx512AreBitIdentical) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  const auto x = RandomVector(1001, 4, -30.0f, 30.0f);
  const auto up = RandomVector(1001, 5);
  std::vector<float> a = x, b = x;
  LogSoftmaxInPlace(a, Isa::kAvx2);
  LogSoftmaxInPlace(b, Isa::kAvx512);
  EXPECT_TRUE(BitEqual(a, b));
  SwiGlu(x, up, a, Isa::kAvx2);
  SwiGlu(x, up, b, Isa::kAvx512);
  EXPECT_TRUE(BitEqual(a, b));
}

INSTANTIATE_TEST_SUITE_P(CpuIsas, CpuVectorOpsTest, ::testing::ValuesIn(SupportedIsas()),
                         testing::IsaParamName);

}  // namespace
}  // namespace tessera::kernels::cpu
