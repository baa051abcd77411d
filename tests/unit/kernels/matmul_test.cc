#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/reference.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::AllNear;
using testing::BitEqual;
using testing::MakeWeights;
using testing::RandomVector;

class CpuMatmulTest : public ::testing::TestWithParam<Isa> {};

// |error| bound for a k-term f32 dot of values in [-1, 1] against an f64 reference.
double Tolerance(int64_t k) { return 2e-6 * static_cast<double>(k) + 1e-6; }

TEST_P(CpuMatmulTest, F32MatchesReferenceOnAwkwardSizes) {
  ThreadPool pool(2);
  uint64_t seed = 1;
  for (int64_t m : {1, 3, 4, 5, 17}) {
    for (int64_t n : {1, 3, 15, 16, 17, 97}) {
      for (int64_t k : {1, 3, 15, 16, 17, 97, 576}) {
        auto w = MakeWeights(WeightFormat::kF32, n, k, ++seed);
        const auto x = RandomVector(m * k, ++seed);
        std::vector<float> y(m * n), ref(m * n);
        Matmul(pool, x, m, w.view, y, GetParam());
        reference::Matmul(x, m, w.view, ref);
        ASSERT_TRUE(AllNear(y, ref, Tolerance(k))) << "m=" << m << " n=" << n << " k=" << k;
      }
    }
  }
}

constexpr WeightFormat kQuantFormats[] = {WeightFormat::kQ8_0, WeightFormat::kQ4_0,
                                          WeightFormat::kQ4_1, WeightFormat::kMxfp4,
                                          WeightFormat::kNvfp4};

TEST_P(CpuMatmulTest, QuantizedMatchesReference) {
  ThreadPool pool(2);
  uint64_t seed = 100;
  for (WeightFormat format : kQuantFormats) {
    for (int64_t m : {1, 3, 8, 17}) {
      for (int64_t n : {1, 15, 16, 17, 97}) {
        for (int64_t k : {32, 64, 96, 192, 576}) {
          if (k % FormatBlockElements(format) != 0) continue;
          auto w = MakeWeights(format, n, k, ++seed);
          const auto x = RandomVector(m * k, ++seed);
          std::vector<float> y(m * n), ref(m * n);
          Matmul(pool, x, m, w.view, y, GetParam());
          reference::Matmul(x, m, w.view, ref);
          ASSERT_TRUE(AllNear(y, ref, Tolerance(k)))
              << WeightFormatName(format) << " m=" << m << " n=" << n << " k=" << k;
        }
      }
    }
  }
}

// Keeping weights quantized is a pure speed choice: same bits as dequantizing at load. k = 576
// and 320 are multiples of 64 but not of 128 (an odd number of NVFP4 blocks per row).
TEST_P(CpuMatmulTest, QuantizedIsBitIdenticalToDequantizedF32) {
  ThreadPool pool(2);
  for (WeightFormat format : kQuantFormats) {
    for (int64_t k : {576, 320, 1024}) {
      auto w = MakeWeights(format, 97, k, 7);
      auto f = testing::DequantizedCopy(w.view);
      for (int64_t m : {1, 2, 5, 16, 33}) {
        const auto x = RandomVector(m * k, 8 + m);
        std::vector<float> yq(m * 97), yf(m * 97);
        Matmul(pool, x, m, w.view, yq, GetParam());
        Matmul(pool, x, m, f.view, yf, GetParam());
        ASSERT_TRUE(BitEqual(yq, yf)) << WeightFormatName(format) << " k=" << k << " m=" << m;
      }
    }
  }
}

// The FP4 formats' matmul reads the values ggml's decoder gives (gguf::DequantizeToF32, checked
// against ggml's own Python port in gguf_test), for blocks with every scale byte and code.
TEST_P(CpuMatmulTest, Fp4MatchesGgufDequantization) {
  ThreadPool pool(2);
  for (WeightFormat format : {WeightFormat::kMxfp4, WeightFormat::kNvfp4}) {
    const int64_t n = 33, k = 320;
    auto w = testing::RandomBlockWeights(format, n, k, 5);
    const auto values = gguf::DequantizeToF32(ToGgmlType(format), w.bytes, n * k);
    ASSERT_TRUE(values.ok());
    const WeightView f{WeightFormat::kF32, values->data(), n, k};
    for (int64_t m : {1, 2, 3, 17}) {
      const auto x = RandomVector(m * k, 30 + m);
      std::vector<float> yq(m * n), yf(m * n);
      Matmul(pool, x, m, w.view, yq, GetParam());
      Matmul(pool, x, m, f, yf, GetParam());
      ASSERT_TRUE(BitEqual(yq, yf)) << WeightFormatName(format) << " m=" << m;
    }
  }
}

// DESIGN.md §6: row i's output must not depend on m, its index, other rows, or the threads.
TEST_P(CpuMatmulTest, BatchInvariantBitExact) {
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kQ8_0, WeightFormat::kQ4_1,
                              WeightFormat::kMxfp4, WeightFormat::kNvfp4}) {
    for (int64_t k : {576, 97}) {
      if (k % FormatBlockElements(format) != 0) continue;
      const int64_t n = 53;
      auto w = MakeWeights(format, n, k, 11);
      const auto probe = RandomVector(k, 12);
      ThreadPool single(1);
      std::vector<float> alone(n);
      Matmul(single, probe, 1, w.view, alone, GetParam());
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        for (int64_t m = 1; m <= 37; ++m) {
          for (int64_t row : {int64_t{0}, (m * 5) / 7, m - 1}) {  // probe first, inside, last
            auto x = RandomVector(m * k, 1000 + m);
            std::copy(probe.begin(), probe.end(), x.begin() + row * k);
            std::vector<float> y(m * n);
            Matmul(pool, x, m, w.view, y, GetParam());
            ASSERT_TRUE(BitEqual({y.data() + row * n, static_cast<size_t>(n)}, alone))
                << WeightFormatName(format) << " k=" << k << " threads=" << threads
                << " m=" << m << " row=" << row;
          }
        }
      }
    }
  }
}

// One parallel region over several matrices' panels (ranges spanning two matrices) gives each
// output the bits of its own Matmul, with mixed formats and row counts that are not multiples of
// the panel size.
void ExpectSameInputMatchesSeparate(int64_t k, const WeightFormat (&formats)[4], Isa isa) {
  const int64_t rows[] = {17, 1, 40, 15};
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t m : {1, 3, 8, 17}) {
      for (size_t count = 1; count <= 4; ++count) {
        std::vector<testing::OwnedWeights> weights;
        std::vector<std::vector<float>> fused(count), separate(count);
        std::vector<MatmulOutput> outputs;
        for (size_t i = 0; i < count; ++i) {
          weights.push_back(MakeWeights(formats[i], rows[i], k, 40 + i));
          fused[i].assign(m * rows[i], -1.0f);
          separate[i].assign(m * rows[i], -2.0f);
        }
        for (size_t i = 0; i < count; ++i) outputs.push_back({weights[i].view, fused[i]});
        const auto x = RandomVector(m * k, 50 + m);
        MatmulSameInput(pool, x, m, outputs, isa);
        for (size_t i = 0; i < count; ++i) {
          Matmul(pool, x, m, weights[i].view, separate[i], isa);
          ASSERT_TRUE(BitEqual(fused[i], separate[i]))
              << "k=" << k << " threads=" << threads << " m=" << m << " outputs=" << count
              << " output " << i;
        }
      }
    }
  }
}

TEST_P(CpuMatmulTest, SameInputMatchesSeparateMatmuls) {
  ExpectSameInputMatchesSeparate(96,
                                 {WeightFormat::kQ4_1, WeightFormat::kQ8_0, WeightFormat::kF32,
                                  WeightFormat::kQ4_0},
                                 GetParam());
  ExpectSameInputMatchesSeparate(192,
                                 {WeightFormat::kNvfp4, WeightFormat::kMxfp4, WeightFormat::kF32,
                                  WeightFormat::kNvfp4},
                                 GetParam());
}

// Independent problems, each with its own x, m (0 included), k and format, in one parallel
// region (ranges spanning several problems): each y gets the bits of its own Matmul, for any
// thread count; a problem with m == 0 leaves its y untouched.
TEST_P(CpuMatmulTest, ManyMatchesSeparateMatmuls) {
  struct Shape {
    WeightFormat format;
    int64_t m, n, k;
  };
  const Shape shapes[] = {{WeightFormat::kQ4_0, 3, 17, 64},   {WeightFormat::kF32, 1, 5, 45},
                          {WeightFormat::kQ8_0, 0, 16, 32},   {WeightFormat::kF32, 17, 40, 97},
                          {WeightFormat::kQ4_1, 2, 1, 96},    {WeightFormat::kQ8_0, 9, 33, 128},
                          {WeightFormat::kNvfp4, 6, 19, 320}, {WeightFormat::kMxfp4, 1, 18, 96},
                          {WeightFormat::kNvfp4, 2, 16, 64}};
  constexpr float kSentinel = -3.5f;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<testing::OwnedWeights> weights;
    std::vector<std::vector<float>> xs, many, separate;
    for (size_t i = 0; i < std::size(shapes); ++i) {
      const Shape& s = shapes[i];
      weights.push_back(MakeWeights(s.format, s.n, s.k, 60 + i));
      xs.push_back(RandomVector(s.m * s.k, 70 + i));
      many.emplace_back(std::max<int64_t>(s.m, 1) * s.n, kSentinel);
      separate.emplace_back(std::max<int64_t>(s.m, 1) * s.n, kSentinel);
    }
    std::vector<MatmulProblem> problems;
    for (size_t i = 0; i < std::size(shapes); ++i) {
      problems.push_back({xs[i], shapes[i].m, weights[i].view, many[i]});
    }
    MatmulMany(pool, problems, GetParam());
    MatmulMany(pool, {}, GetParam());  // no problems: a no-op
    for (size_t i = 0; i < std::size(shapes); ++i) {
      Matmul(pool, xs[i], shapes[i].m, weights[i].view, separate[i], GetParam());
      ASSERT_TRUE(BitEqual(many[i], separate[i])) << "threads=" << threads << " problem " << i;
    }
  }
}

TEST(CpuMatmulFormatTest, SupportedFormats) {
  for (WeightFormat format : kQuantFormats) EXPECT_TRUE(MatmulSupportsFormat(format));
  EXPECT_TRUE(MatmulSupportsFormat(WeightFormat::kF32));
  EXPECT_FALSE(MatmulSupportsFormat(WeightFormat::kF16));
  EXPECT_FALSE(MatmulSupportsFormat(WeightFormat::kBF16));
}

TEST(CpuMatmulDeathTest, SameInputRejectsDifferentK) {
  ThreadPool pool(2);
  auto a = MakeWeights(WeightFormat::kF32, 4, 32, 1);
  auto b = MakeWeights(WeightFormat::kF32, 4, 64, 2);
  const auto x = RandomVector(64, 3);
  std::vector<float> ya(4), yb(4);
  const MatmulOutput outputs[] = {{a.view, ya}, {b.view, yb}};
  EXPECT_DEATH(MatmulSameInput(pool, x, 1, outputs), "outputs differ in k");
}

TEST(CpuMatmulIsaTest, Avx2AndAvx512AreBitIdentical) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool(2);
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kQ4_1, WeightFormat::kMxfp4,
                              WeightFormat::kNvfp4}) {
    auto w = MakeWeights(format, 97, 640, 21);
    for (int64_t m : {1, 9}) {
      const auto x = RandomVector(m * 640, 22);
      std::vector<float> a(m * 97), b(m * 97);
      Matmul(pool, x, m, w.view, a, Isa::kAvx2);
      Matmul(pool, x, m, w.view, b, Isa::kAvx512);
      EXPECT_TRUE(BitEqual(a, b)) << WeightFormatName(format) << " m=" << m;
    }
  }
}

// m = 0 reads no input (x is empty: any read would be out of bounds, caught by the sanitized
// builds) and writes no output (y's sentinels survive), on every ISA and weight format.
TEST(CpuMatmulEdgeTest, EmptyShapesAreNoOps) {
  ThreadPool pool(2);
  constexpr float kSentinel = -12345.5f;
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kQ4_1, WeightFormat::kNvfp4}) {
    auto w = MakeWeights(format, 4, 64, 1);
    for (Isa isa : SupportedIsas()) {
      SCOPED_TRACE(std::string(WeightFormatName(format)) + " " + std::string(IsaName(isa)));
      const std::vector<float> x;
      std::vector<float> y(16, kSentinel), y2(16, kSentinel);
      Matmul(pool, x, 0, w.view, y, isa);
      const MatmulOutput outputs[] = {{w.view, y}, {w.view, y2}};
      MatmulSameInput(pool, x, 0, outputs, isa);
      EXPECT_EQ(y, std::vector<float>(16, kSentinel));
      EXPECT_EQ(y2, std::vector<float>(16, kSentinel));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuIsas, CpuMatmulTest, ::testing::ValuesIn(SupportedIsas()),
                         testing::IsaParamName);

}  // namespace
}  // namespace tessera::kernels::cpu
