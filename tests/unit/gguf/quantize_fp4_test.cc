// The MXFP4 / NVFP4 encoders (quantize_fp4.h): rounding of scales and elements, hand-worked
// blocks, and quantize -> dequantize round trips with their error bounds.
#include "common/gguf/quantize_fp4.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "common/gguf/dequantize.h"
#include "common/gguf/fp4_codec.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The E4M3 value of a scale byte (ggml stores it halved).
float E4M3Value(uint8_t d) { return 2.0f * fp4::Ue4m3ToFloatHalf(d); }

TEST(QuantizeFp4Test, FloatToE4M3RoundsToNearestEvenAndSaturates) {
  const struct {
    float x;
    uint8_t code;
  } cases[] = {
      {1.0f, 0x38},          {448.0f, 0x7E},          {1000.0f, 0x7E},  // saturates, never 0x7F
      {464.0f, 0x7E},        {kInf, 0x7E},            {0.0f, 0x00},
      {-1.0f, 0x00},         {kNaN, 0x00},            {1.0f / 512, 0x01},  // smallest subnormal
      {1.0f / 1024, 0x00},   // tie between 0 and 2^-9: even (0)
      {3.0f / 1024, 0x02},   // tie between 1 and 2 (x 2^-9): even (2)
      {7.5f / 512, 0x08},    // tie between 0x07 and the smallest normal 0x08: even (0x08)
      {1.0625f, 0x38},       // tie between 1.0 and 1.125: even mantissa (1.0)
      {1.1875f, 0x3A},       // tie between 1.125 and 1.25: even mantissa (1.25)
      {1.97f, 0x40},         // rounds up into the next binade (2.0)
      {300.0f, 0x79},        // 288 (exponent 15, mantissa 1) is nearest; ggml's rounding gives 448
  };
  for (const auto& c : cases) {
    EXPECT_EQ(fp4::FloatToE4M3(c.x), c.code) << c.x;
  }
  // Every finite positive byte round-trips.
  for (int d = 1; d < 0x7F; ++d) EXPECT_EQ(fp4::FloatToE4M3(E4M3Value(d)), d) << d;
}

TEST(QuantizeFp4Test, FloatToE2M1RoundsToNearestEvenAndSaturates) {
  const struct {
    float v;
    uint8_t code;
  } cases[] = {
      {0.0f, 0},  {0.25f, 0},  {0.26f, 1}, {0.75f, 2},  {1.25f, 2},  {1.75f, 4},
      {2.5f, 4},  {2.51f, 5},  {3.5f, 6},  {5.0f, 6},   {5.01f, 7},  {100.0f, 7},
      {kInf, 7},  {-0.75f, 10}, {-6.0f, 15}, {-0.1f, 0}, {-0.0f, 0},  {kNaN, 0},
  };
  for (const auto& c : cases) EXPECT_EQ(fp4::FloatToE2M1(c.v), c.code) << c.v;
  // Every value of the grid maps to its own code (code 8, -0, is written as 0).
  for (int code = 0; code < 16; ++code) {
    if (code == 8) continue;
    EXPECT_EQ(fp4::FloatToE2M1(0.5f * fp4::kE2M1Doubled[code]), code) << code;
  }
}

// Values on the E2M1 grid times 2^(e - 127) come back exactly. amax = 6 picks e = floor(log2 6) -
// 2 + 127 = 127 (scale 1).
TEST(QuantizeFp4Test, Mxfp4HandWorkedBlock) {
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[j] = 0.5f * fp4::kE2M1Doubled[j];            // codes 0..15
    x[j + 16] = 0.5f * fp4::kE2M1Doubled[15 - j];  // codes 15..0
  }
  std::vector<uint8_t> block(kMxfp4BlockBytes);
  QuantizeMxfp4Block(std::span<const float, 32>(x.data(), 32), std::span<uint8_t, 17>(block));
  EXPECT_EQ(block[0], 127);
  for (int j = 0; j < 16; ++j) {
    const int lo = j == 8 ? 0 : j;  // -0 is written as code 0
    const int hi = 15 - j == 8 ? 0 : 15 - j;
    EXPECT_EQ(block[1 + j], lo | (hi << 4)) << j;
  }
  // Halving every value halves the scale: e = 126, same codes.
  for (float& v : x) v *= 0.5f;
  std::vector<uint8_t> half(kMxfp4BlockBytes);
  QuantizeMxfp4Block(std::span<const float, 32>(x.data(), 32), std::span<uint8_t, 17>(half));
  EXPECT_EQ(half[0], 126);
  EXPECT_TRUE(std::equal(block.begin() + 1, block.end(), half.begin() + 1));
}

// With tensor scale 1, a sub-block whose largest magnitude is 6 * S gets scale byte E4M3(S) and,
// when its values are on the grid times S, exact codes.
TEST(QuantizeFp4Test, Nvfp4HandWorkedBlock) {
  std::vector<float> x(64, 0.0f);
  const float scales[4] = {1.0f, 0.0f, 448.0f, 1.0f / 512};  // 0x38, 0x00, 0x7E, 0x01
  for (int s = 0; s < 4; ++s) {
    for (int j = 0; j < 16; ++j) x[16 * s + j] = 0.5f * fp4::kE2M1Doubled[j] * scales[s];
  }
  std::vector<uint8_t> block(kNvfp4BlockBytes);
  QuantizeNvfp4Block(std::span<const float, 64>(x.data(), 64), 1.0f,
                     std::span<uint8_t, 36>(block));
  EXPECT_EQ(block[0], 0x38);
  EXPECT_EQ(block[1], 0x00);
  EXPECT_EQ(block[2], 0x7E);
  EXPECT_EQ(block[3], 0x01);
  for (int s : {0, 2, 3}) {
    for (int j = 0; j < 8; ++j) {
      // Element j is code j (low nibble); element j + 8 is code 8 + j, written as 0 for -0.
      const int hi = j == 0 ? 0 : 8 + j;
      EXPECT_EQ(block[4 + 8 * s + j], j | (hi << 4)) << s << " " << j;
    }
  }
  for (int j = 0; j < 8; ++j) EXPECT_EQ(block[4 + 8 + j], 0) << j;  // zero sub-block
  // And they decode back exactly.
  const auto back = DequantizeToF32(GgmlType::kNvfp4, block, 64);
  ASSERT_TRUE(back.ok());
  for (int i = 0; i < 64; ++i) EXPECT_EQ((*back)[i], x[i]) << i;
}

std::vector<float> RandomNormal(size_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// MXFP4: every element within half a grid step of the block's top binade, 2^(floor(log2 amax)-2)
// (the largest gap, between 4 and 6 of the E2M1 grid, is 2^(floor(log2 amax) - 1)), or of the
// clamp at 6 * 2^(e - 127) = 1.5 * 2^floor(log2 amax) for amax above it.
TEST(QuantizeFp4Test, Mxfp4RoundTripErrorIsBounded) {
  const std::vector<float> x = RandomNormal(32 * 512, 11, 0.02f);
  const auto blocks = QuantizeFromF32(GgmlType::kMxfp4, x);
  ASSERT_TRUE(blocks.ok());
  ASSERT_EQ(blocks->size(), 512u * 17);
  const auto y = DequantizeToF32(GgmlType::kMxfp4, *blocks, x.size());
  ASSERT_TRUE(y.ok());
  for (size_t b = 0; b < 512; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float top = std::ldexp(1.0f, std::ilogb(amax));
    for (int j = 0; j < 32; ++j) {
      const size_t i = b * 32 + j;
      ASSERT_LE(std::fabs((*y)[i] - x[i]), 0.5f * top) << "element " << i;
    }
  }
}

// NVFP4 with a tensor scale: y = decoded * s. Each element is within the largest E2M1 half-gap
// (1, between 4 and 6) of its sub-block's scale E4M3 * s, and the sub-block holding the tensor's
// largest magnitude gets the largest scale (448, 0x7E).
TEST(QuantizeFp4Test, Nvfp4TensorRoundTripErrorIsBounded) {
  std::vector<float> x = RandomNormal(64 * 256, 12, 0.05f);
  x[1000] = 3.0f;  // an outlier sets the tensor scale
  const auto q = QuantizeNvfp4Tensor(x);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->tensor_scale, 3.0f / (6.0f * 448.0f));
  ASSERT_EQ(q->blocks.size(), 256u * 36);
  EXPECT_EQ(q->blocks[(1000 / 64) * 36 + (1000 % 64) / 16], 0x7E);
  const auto y = DequantizeToF32(GgmlType::kNvfp4, q->blocks, x.size());
  ASSERT_TRUE(y.ok());
  double sum_sq_err = 0, sum_sq = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const uint8_t d = q->blocks[(i / 64) * 36 + (i % 64) / 16];
    const float unit = E4M3Value(d) * q->tensor_scale;
    const float back = (*y)[i] * q->tensor_scale;
    ASSERT_LE(std::fabs(back - x[i]), unit * 1.0001f) << "element " << i;
    sum_sq_err += (back - x[i]) * (back - x[i]);
    sum_sq += x[i] * x[i];
  }
  // 4-bit floats: the relative RMS error of a normal tensor is around 10%.
  EXPECT_LT(std::sqrt(sum_sq_err / sum_sq), 0.15);
}

// The tensor function is the block function with the tensor's own scale; QuantizeFromF32 is the
// block function with scale 1. An all-zero tensor has scale 1 and zero blocks.
TEST(QuantizeFp4Test, Nvfp4EntryPointsAgree) {
  const std::vector<float> x = RandomNormal(64 * 3, 13, 1.0f);
  const auto q = QuantizeNvfp4Tensor(x);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->tensor_scale, Nvfp4TensorScale(x));
  const auto plain = QuantizeFromF32(GgmlType::kNvfp4, x);
  ASSERT_TRUE(plain.ok());
  for (size_t b = 0; b < 3; ++b) {
    const std::span<const float, 64> block_x(x.data() + 64 * b, 64);
    std::vector<uint8_t> scaled(36), unscaled(36);
    QuantizeNvfp4Block(block_x, q->tensor_scale, std::span<uint8_t, 36>(scaled));
    QuantizeNvfp4Block(block_x, 1.0f, std::span<uint8_t, 36>(unscaled));
    EXPECT_TRUE(std::equal(scaled.begin(), scaled.end(), q->blocks.begin() + 36 * b)) << b;
    EXPECT_TRUE(std::equal(unscaled.begin(), unscaled.end(), plain->begin() + 36 * b)) << b;
  }
  const auto zero = QuantizeNvfp4Tensor(std::vector<float>(128, 0.0f));
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->tensor_scale, 1.0f);
  EXPECT_EQ(zero->blocks, std::vector<uint8_t>(72, 0));
}

TEST(QuantizeFp4Test, Errors) {
  EXPECT_EQ(QuantizeNvfp4Tensor(std::vector<float>(32)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeFromF32(GgmlType::kNvfp4, std::vector<float>(32)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeFromF32(GgmlType::kMxfp4, std::vector<float>(16)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(QuantizeNvfp4Tensor({})->blocks.empty());
}

}  // namespace
}  // namespace tessera::gguf
