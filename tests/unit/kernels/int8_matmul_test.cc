#include "kernels/cpu/int8_matmul.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/reference.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::AllNear;
using testing::BitEqual;
using testing::MakeWeights;
using testing::RandomVector;

constexpr WeightFormat kFormats[] = {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ4_1};

// Weights quantized from random values plus their packed copy.
struct PackedWeights {
  testing::OwnedWeights original;
  std::vector<uint8_t> packed;
  Int8WeightView view;
};

PackedWeights Pack(WeightFormat format, int64_t rows, int64_t cols, uint64_t seed) {
  PackedWeights w{MakeWeights(format, rows, cols, seed), {}, {}};
  w.packed.resize(PackedInt8Bytes(format, rows, cols));
  w.view = PackInt8Weights(w.original.view, w.packed);
  return w;
}

std::vector<float> RunInt8(ThreadPool& pool, const std::vector<float>& x, int64_t m,
                           const Int8WeightView& w, Isa isa) {
  std::vector<float> y(m * w.rows, -1.0f);
  const Int8MatmulOutput out{w, y};
  Int8MatmulSameInput(pool, x, m, {&out, 1}, isa);
  return y;
}

// The portable copy (kScalar) on every machine; the VNNI copy where the CPU has it.
// Every ISA this CPU runs: kScalar (portable copy), kAvx2 (AVX2 copy), kAvx512 (VNNI copy, or
// the AVX2 copy on AVX-512 CPUs without VNNI).
std::vector<Isa> Int8Isas() { return SupportedIsas(); }

// Σ_j |w_j| |x_j| over k terms of at most 1: the int path rounds each block's float terms a few
// times (relative 2^-24 each) against the reference's f64 sum.
double Tolerance(int64_t k) { return 1e-6 * static_cast<double>(k) + 1e-6; }

class CpuInt8MatmulTest : public ::testing::TestWithParam<Isa> {};

TEST_P(CpuInt8MatmulTest, MatchesReferenceOnAwkwardSizes) {
  ThreadPool pool(2);
  uint64_t seed = 1;
  for (WeightFormat format : kFormats) {
    for (int64_t m : {1, 3, 8, 9, 17}) {
      for (int64_t n : {1, 15, 16, 17, 33}) {
        for (int64_t k : {32, 96, 576}) {
          const PackedWeights w = Pack(format, n, k, ++seed);
          const auto x = RandomVector(m * k, ++seed, -3.0f, 3.0f);
          std::vector<float> ref(m * n);
          reference::Int8Matmul(x, m, w.original.view, ref);
          ASSERT_TRUE(AllNear(RunInt8(pool, x, m, w.view, GetParam()), ref, 3.0 * Tolerance(k)))
              << WeightFormatName(format) << " m=" << m << " n=" << n << " k=" << k;
        }
      }
    }
  }
}

// Batch invariance: a row's outputs are the same bits alone, in any batch, at any thread count.
TEST_P(CpuInt8MatmulTest, RowsAreBitIdenticalAloneAndBatched) {
  ThreadPool one(1), three(3);
  for (WeightFormat format : kFormats) {
    const int64_t m = 13, n = 50, k = 160;
    const PackedWeights w = Pack(format, n, k, 7);
    const auto x = RandomVector(m * k, 8);
    const std::vector<float> batched = RunInt8(three, x, m, w.view, GetParam());
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<float> row(x.begin() + i * k, x.begin() + (i + 1) * k);
      const std::vector<float> alone = RunInt8(one, row, 1, w.view, GetParam());
      ASSERT_TRUE(BitEqual(alone, std::span<const float>(batched).subspan(i * n, n)))
          << WeightFormatName(format) << " row " << i;
    }
  }
}

TEST_P(CpuInt8MatmulTest, SameInputEqualsSeparateCalls) {
  ThreadPool pool(2);
  const int64_t m = 5, k = 64;
  const PackedWeights a = Pack(WeightFormat::kQ4_1, 40, k, 11);
  const PackedWeights b = Pack(WeightFormat::kQ8_0, 17, k, 12);
  const auto x = RandomVector(m * k, 13);
  std::vector<float> ya(m * 40), yb(m * 17);
  const Int8MatmulOutput outs[] = {{a.view, ya}, {b.view, yb}};
  Int8MatmulSameInput(pool, x, m, outs, GetParam());
  EXPECT_TRUE(BitEqual(ya, RunInt8(pool, x, m, a.view, GetParam())));
  EXPECT_TRUE(BitEqual(yb, RunInt8(pool, x, m, b.view, GetParam())));
}

INSTANTIATE_TEST_SUITE_P(CpuIsas, CpuInt8MatmulTest, ::testing::ValuesIn(Int8Isas()),
                         testing::IsaParamName);

// Every SIMD copy computes the portable copy's bits (all follow int8_matmul.h's fold).
TEST(CpuInt8MatmulIsaTest, EverySimdCopyEqualsPortableBitForBit) {
  if (SupportedIsas().size() == 1) GTEST_SKIP() << "this CPU has no SIMD copy (scalar only)";
  ThreadPool pool(2);
  uint64_t seed = 500;
  for (Isa isa : SupportedIsas()) {
    if (isa == Isa::kScalar) continue;
    for (WeightFormat format : kFormats) {
      for (int64_t m : {1, 3, 5, 8, 20}) {
        const PackedWeights w = Pack(format, 47, 288, ++seed);
        auto x = RandomVector(m * 288, ++seed, -5.0f, 5.0f);
        x[3] = 0.0f;
        std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block: dx = 0
        EXPECT_TRUE(BitEqual(RunInt8(pool, x, m, w.view, isa),
                             RunInt8(pool, x, m, w.view, Isa::kScalar)))
            << IsaName(isa) << " " << WeightFormatName(format) << " m=" << m;
      }
    }
  }
}

// The integer sums at their extremes (every code at its largest magnitude, every activation at
// ±127, including Q8_0's -128): no SIMD copy saturates an intermediate.
TEST(CpuInt8MatmulIsaTest, ExtremeCodesDoNotSaturate) {
  ThreadPool pool(1);
  constexpr int64_t kRows = 16, kCols = 64;
  for (WeightFormat format : kFormats) {
    testing::OwnedWeights w = MakeWeights(format, kRows, kCols, 900);
    const size_t block_bytes = FormatBlockBytes(format);
    for (size_t off = 0; off < w.bytes.size(); off += block_bytes) {
      const size_t codes = format == WeightFormat::kQ4_1 ? 4 : 2;  // after d (and m)
      for (size_t j = off + codes; j < off + block_bytes; ++j) {
        w.bytes[j] = format == WeightFormat::kQ8_0 ? ((j / block_bytes) % 2 ? 0x80 : 0x7F) : 0xFF;
      }
    }
    std::vector<uint8_t> packed(PackedInt8Bytes(format, kRows, kCols));
    const Int8WeightView view = PackInt8Weights(w.view, packed);
    for (float sign : {1.0f, -1.0f}) {
      const std::vector<float> x(kCols, sign);  // quantizes to all ±127
      const std::vector<float> scalar = RunInt8(pool, x, 1, view, Isa::kScalar);
      for (Isa isa : SupportedIsas()) {
        EXPECT_TRUE(BitEqual(RunInt8(pool, x, 1, view, isa), scalar))
            << IsaName(isa) << " " << WeightFormatName(format) << " sign=" << sign;
      }
      std::vector<float> exact(kRows);
      reference::Int8Matmul(x, 1, w.view, exact);
      EXPECT_TRUE(AllNear(scalar, exact, 1e-4, 1e-5)) << WeightFormatName(format);
    }
  }
}

// The lossy part is bounded: against the exact f32 matmul, int8 activations move an output by
// at most a few percent of the typical output magnitude.
TEST(CpuInt8MatmulAccuracyTest, CloseToExactMatmul) {
  ThreadPool pool(2);
  const int64_t m = 4, n = 64, k = 576;
  for (WeightFormat format : kFormats) {
    const PackedWeights w = Pack(format, n, k, 21);
    const auto x = RandomVector(m * k, 22);
    std::vector<float> exact(m * n);
    Matmul(pool, x, m, w.original.view, exact);
    const std::vector<float> approx = RunInt8(pool, x, m, w.view, BestIsa());
    double err2 = 0.0, norm2 = 0.0;
    for (size_t i = 0; i < exact.size(); ++i) {
      err2 += (approx[i] - exact[i]) * (approx[i] - exact[i]);
      norm2 += double{exact[i]} * exact[i];
    }
    EXPECT_GT(err2, 0.0) << "int8 activations should not be exact on random data";
    EXPECT_LT(std::sqrt(err2 / norm2), 0.02) << WeightFormatName(format);
  }
}

TEST(CpuInt8MatmulPackTest, PackedSizeRoundsRowsUpToGroups) {
  EXPECT_EQ(PackedInt8Bytes(WeightFormat::kQ4_1, 16, 64), 2u * (64 + 256));
  EXPECT_EQ(PackedInt8Bytes(WeightFormat::kQ4_1, 17, 64), 2u * 2u * (64 + 256));
  EXPECT_EQ(PackedInt8Bytes(WeightFormat::kQ4_0, 1, 32), 32u + 256u);
  EXPECT_EQ(PackedInt8Bytes(WeightFormat::kQ8_0, 16, 32), 32u + 512u);
}

TEST(CpuInt8MatmulPackTest, RejectsUnsupportedFormatLoudly) {
  EXPECT_FALSE(Int8MatmulSupportsFormat(WeightFormat::kF32));
  const std::vector<float> f(32 * 2, 1.0f);
  const WeightView w{WeightFormat::kF32, f.data(), 2, 32};
  std::vector<uint8_t> out(4096);
  EXPECT_DEATH(PackInt8Weights(w, out), "unsupported format");
}

}  // namespace
}  // namespace tessera::kernels::cpu
