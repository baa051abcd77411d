// Reference quantizers: exact bytes for blocks whose scale is exactly representable, and
// quantize -> dequantize error bounds on random data.
#include <cmath>
#include <random>
#include <vector>

#include "common/gguf/dequantize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

using ::testing::ElementsAreArray;

std::vector<float> RoundTrip(GgmlType type, const std::vector<float>& x) {
  auto q = QuantizeFromF32(type, x);
  EXPECT_TRUE(q.ok()) << q.status();
  if (!q.ok()) return {};
  EXPECT_EQ(q->size(),
            x.size() / GetGgmlTypeInfo(type).block_size * GetGgmlTypeInfo(type).type_size);
  auto y = DequantizeToF32(type, *q, x.size());
  EXPECT_TRUE(y.ok()) << y.status();
  return y.ok() ? *y : std::vector<float>();
}

TEST(QuantizeTest, Q4_1ExactBlock) {
  // Values -1, -0.5, ..., 6.5 then back down: min -1, max 6.5, d = 7.5 / 15 = 0.5 exactly, so
  // every value is hit exactly: bytes {d = 0x3800, m = 0xBC00, byte j = j | (15 - j) << 4}.
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[j] = j * 0.5f - 1.0f;
    x[j + 16] = (15 - j) * 0.5f - 1.0f;
  }
  std::vector<uint8_t> expected = {0x00, 0x38, 0x00, 0xBC};
  for (int j = 0; j < 16; ++j) expected.push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
  EXPECT_THAT(*QuantizeFromF32(GgmlType::kQ4_1, x), ElementsAreArray(expected));
  EXPECT_THAT(RoundTrip(GgmlType::kQ4_1, x), ElementsAreArray(x));
}

TEST(QuantizeTest, Q8_0ExactBlock) {
  // max |x| = 31.75 = 127 * 0.25, so d = 0.25 (0x3400) and q = 4 x exactly.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = (j * 8 - 127) * 0.25f;  // -31.75 .. 30.25
  std::vector<uint8_t> expected = {0x00, 0x34};
  for (int j = 0; j < 32; ++j)
    expected.push_back(static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 127)));
  EXPECT_THAT(*QuantizeFromF32(GgmlType::kQ8_0, x), ElementsAreArray(expected));
  EXPECT_THAT(RoundTrip(GgmlType::kQ8_0, x), ElementsAreArray(x));
}

TEST(QuantizeTest, Q4_0ExactBlock) {
  // The largest magnitude value -4 maps to code 0: d = -4 / -8 = 0.5; x = (q - 8) * 0.5.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = (j % 16 - 8) * 0.5f;  // -4 .. 3.5, twice
  std::vector<uint8_t> expected = {0x00, 0x38};
  for (int j = 0; j < 16; ++j) expected.push_back(static_cast<uint8_t>(j | (j << 4)));
  EXPECT_THAT(*QuantizeFromF32(GgmlType::kQ4_0, x), ElementsAreArray(expected));
  EXPECT_THAT(RoundTrip(GgmlType::kQ4_0, x), ElementsAreArray(x));
}

TEST(QuantizeTest, ConstantAndZeroBlocks) {
  const std::vector<float> zeros(32, 0.0f);
  for (GgmlType t :
       {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0}) {
    EXPECT_THAT(RoundTrip(t, zeros), ElementsAreArray(zeros)) << GgmlTypeName(t);
  }
  const std::vector<float> constant(32, 2.5f);  // Q4_1: d = 0, m = 2.5
  EXPECT_THAT(RoundTrip(GgmlType::kQ4_1, constant), ElementsAreArray(constant));
}

// Per-block bound on |x - dequant(quant(x))| for random data, derived from each format:
// round-to-nearest gives half a step; the f16 scale (and min) add a relative 2^-11 error on up to
// `max_code` steps; Q4_0/Q5_0 can lose one extra step at the clamped extreme.
struct Bound {
  GgmlType type;
  float steps_per_range;  // (max - min) / d for asymmetric formats, amax / |d| for symmetric
  bool asymmetric;
  float step_fraction;  // allowed error in units of d
};

TEST(QuantizeTest, RandomRoundTripErrorIsBounded) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> x(32 * 256);
  for (float& v : x) v = uniform(rng);
  const Bound bounds[] = {
      {GgmlType::kQ8_0, 127, false, 0.5f}, {GgmlType::kQ4_0, 8, false, 1.0f},
      {GgmlType::kQ5_0, 16, false, 1.0f},  {GgmlType::kQ4_1, 15, true, 0.5f},
      {GgmlType::kQ5_1, 31, true, 0.5f},
  };
  for (const Bound& bound : bounds) {
    SCOPED_TRACE(GgmlTypeName(bound.type));
    const std::vector<float> y = RoundTrip(bound.type, x);
    ASSERT_EQ(y.size(), x.size());
    double sum_sq = 0;
    for (size_t block = 0; block < x.size() / 32; ++block) {
      float lo = x[block * 32], hi = lo, amax = 0;
      for (int j = 0; j < 32; ++j) {
        lo = std::min(lo, x[block * 32 + j]);
        hi = std::max(hi, x[block * 32 + j]);
        amax = std::max(amax, std::fabs(x[block * 32 + j]));
      }
      const float d =
          bound.asymmetric ? (hi - lo) / bound.steps_per_range : amax / bound.steps_per_range;
      const float f16_error = std::ldexp(1.0f, -11) * (amax + bound.steps_per_range * d);
      const float limit = bound.step_fraction * d + f16_error;
      for (int j = 0; j < 32; ++j) {
        const size_t i = block * 32 + j;
        ASSERT_LE(std::fabs(x[i] - y[i]), limit) << "element " << i;
        sum_sq += (x[i] - y[i]) * (x[i] - y[i]);
      }
    }
    // Uniform rounding error has RMS step / sqrt(12); allow some slack.
    const double rms = std::sqrt(sum_sq / x.size());
    const double typical_step =
        bound.asymmetric ? 6.0 / bound.steps_per_range : 3.0 / bound.steps_per_range;
    EXPECT_LT(rms, 0.5 * typical_step);
  }
}

TEST(QuantizeTest, HalfAndBf16RoundTrips) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  std::vector<float> x(4096);
  for (float& v : x) v = normal(rng);
  const std::vector<float> f16 = RoundTrip(GgmlType::kF16, x);
  const std::vector<float> bf16 = RoundTrip(GgmlType::kBF16, x);
  const std::vector<float> f32 = RoundTrip(GgmlType::kF32, x);
  ASSERT_EQ(f16.size(), x.size());
  ASSERT_EQ(bf16.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(f16[i] - x[i]), std::ldexp(std::fabs(x[i]), -11) + std::ldexp(1.0f, -25));
    EXPECT_LE(std::fabs(bf16[i] - x[i]), std::ldexp(std::fabs(x[i]), -8));
    EXPECT_EQ(f32[i], x[i]);
    EXPECT_EQ(f16[i], HalfToFloat(FloatToHalf(x[i])));
  }
}

TEST(QuantizeTest, Errors) {
  EXPECT_EQ(QuantizeFromF32(GgmlType::kQ4_0, std::vector<float>(31)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeFromF32(GgmlType::kQ4_K, std::vector<float>(256)).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(QuantizeFromF32(GgmlType::kI32, std::vector<float>(1)).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(QuantizeFromF32(GgmlType::kQ8_0, {})->empty());
}

}  // namespace
}  // namespace tessera::gguf
