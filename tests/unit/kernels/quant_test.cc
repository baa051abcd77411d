// f16 conversion, block (de)quantization and embedding lookup.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/embedding.h"
#include "common/util/half.h"
#include "kernels/cpu/quant.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::MakeWeights;
using testing::RandomVector;

TEST(CpuHalfTest, KnownValues) {
  EXPECT_EQ(util::HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(util::HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(util::HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(util::HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(util::HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(util::HalfToFloat(0x7C00)));
  EXPECT_TRUE(std::isnan(util::HalfToFloat(0x7E00)));
  EXPECT_TRUE(std::signbit(util::HalfToFloat(0x8000)));
  EXPECT_EQ(util::FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(util::FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(util::FloatToHalf(65520.0f), 0x7C00);  // rounds to inf
  EXPECT_EQ(util::FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // ties to even: 0
  EXPECT_EQ(util::FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp -> 2
  EXPECT_EQ(util::FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(util::FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(util::Bf16ToFloat(0x3F80), 1.0f);
}

TEST(CpuHalfTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = util::HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(util::FloatToHalf(f), h) << std::hex << h;
  }
}

TEST(CpuQuantTest, Q8_0LayoutAndValues) {
  BlockQ8_0 block{};
  block.d = util::FloatToHalf(0.5f);
  for (int j = 0; j < 32; ++j) block.qs[j] = static_cast<int8_t>(j - 16);
  std::vector<float> out(32);
  DequantizeRow(WeightFormat::kQ8_0, &block, out);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16));
}

TEST(CpuQuantTest, Q4_1NibbleOrder) {
  // Element j < 16 is the low nibble of byte j, element j + 16 the high nibble.
  BlockQ4_1 block{};
  block.d = util::FloatToHalf(2.0f);
  block.m = util::FloatToHalf(-1.0f);
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>((j & 0xF) | ((15 - j) << 4));
  std::vector<float> out(32);
  DequantizeRow(WeightFormat::kQ4_1, &block, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * j - 1.0f);
    EXPECT_EQ(out[j + 16], 2.0f * (15 - j) - 1.0f);
  }
}

TEST(CpuQuantTest, Q4_0Values) {
  BlockQ4_0 block{};
  block.d = util::FloatToHalf(0.25f);
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | (j << 4));
  std::vector<float> out(32);
  DequantizeRow(WeightFormat::kQ4_0, &block, out);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(out[j], 0.25f * (j - 8));
}

// MXFP4: e = 126 (halved scale 2^-2), byte j = code j (low) | code 15 - j (high); value =
// doubled E2M1 value / 4 = E2M1 value / 2.
TEST(CpuQuantTest, Mxfp4Values) {
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  BlockMxfp4 block{};
  block.e = 126;
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> out(32);
  DequantizeRow(WeightFormat::kMxfp4, &block, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * e2m1[j]) << j;
    EXPECT_EQ(out[j + 16], 0.5f * e2m1[15 - j]) << j;
  }
}

// NVFP4: scales 1, 2, 0.5, 0 (UE4M3 0x38, 0x40, 0x30, 0x00); in sub-block s byte j holds code j
// (element 16s + j) and code 8 + j (element 16s + j + 8), so each sub-block runs through the codes.
TEST(CpuQuantTest, Nvfp4Values) {
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  const float scales[4] = {1.0f, 2.0f, 0.5f, 0.0f};
  BlockNvfp4 block{{0x38, 0x40, 0x30, 0x00}, {}};
  for (int s = 0; s < 4; ++s) {
    for (int j = 0; j < 8; ++j) block.qs[8 * s + j] = static_cast<uint8_t>(j | ((8 + j) << 4));
  }
  std::vector<float> out(64);
  DequantizeRow(WeightFormat::kNvfp4, &block, out);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], scales[i / 16] * e2m1[i % 16]) << i;
}

// The kernels' FP4 rows hold exactly what the GGUF decoder (bit-identical to ggml) gives.
TEST(CpuQuantTest, Fp4RowsMatchGgufDequantization) {
  for (WeightFormat format : {WeightFormat::kMxfp4, WeightFormat::kNvfp4}) {
    const int64_t rows = 64, cols = 256;
    auto w = testing::RandomBlockWeights(format, rows, cols, 17);
    const auto expected = gguf::DequantizeToF32(ToGgmlType(format), w.bytes, rows * cols);
    ASSERT_TRUE(expected.ok());
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(format, w.view.Row(r), row);
      ASSERT_TRUE(testing::BitEqual(row, {expected->data() + r * cols, static_cast<size_t>(cols)}))
          << WeightFormatName(format) << " row " << r;
    }
  }
}

TEST(CpuQuantTest, Fp4Geometry) {
  EXPECT_EQ(FormatBlockElements(WeightFormat::kMxfp4), 32);
  EXPECT_EQ(FormatBlockBytes(WeightFormat::kMxfp4), 17u);
  EXPECT_EQ(FormatBlockElements(WeightFormat::kNvfp4), 64);
  EXPECT_EQ(FormatBlockBytes(WeightFormat::kNvfp4), 36u);
  EXPECT_EQ(RowBytes(WeightFormat::kNvfp4, 576), 9u * 36);
  EXPECT_EQ(RowBytes(WeightFormat::kMxfp4, 576), 18u * 17);
  EXPECT_EQ(WeightFormatFromGgml(gguf::GgmlType::kMxfp4), WeightFormat::kMxfp4);
  EXPECT_EQ(WeightFormatFromGgml(gguf::GgmlType::kNvfp4), WeightFormat::kNvfp4);
  EXPECT_EQ(ToGgmlType(WeightFormat::kNvfp4), gguf::GgmlType::kNvfp4);
  EXPECT_EQ(WeightFormatName(WeightFormat::kMxfp4), "MXFP4");
  EXPECT_DEATH(RowBytes(WeightFormat::kNvfp4, 96), "multiple of the format's block size");
}

TEST(CpuQuantTest, QuantizeDequantizeErrorIsBounded) {
  const auto x = RandomVector(32 * 37, 3);
  for (WeightFormat format : {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ4_1}) {
    auto w = MakeWeights(format, 1, 32 * 37, 3);  // same seed: same values as x
    std::vector<float> back(x.size());
    DequantizeRow(format, w.view.Row(0), back);
    // Half a quantization step of a block in [-1, 1], plus f16 rounding of the scales. Q4_0 is
    // asymmetric (q - 8 in [-8, 7]): values at the clamped end may lose a whole step.
    const double bound = format == WeightFormat::kQ8_0   ? 0.5 / 127
                         : format == WeightFormat::kQ4_1 ? 0.5 * 2.0 / 15
                                                         : 1.0 / 8;
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(back[i], x[i], bound + 1e-3) << WeightFormatName(format) << " " << i;
    }
  }
}

TEST(CpuQuantTest, F16AndBf16Rows) {
  const std::vector<uint16_t> halves = {0x3C00, 0xC000, 0x0000};
  std::vector<float> out(3);
  DequantizeRow(WeightFormat::kF16, halves.data(), out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, 0.0f}));
  const std::vector<uint16_t> bf = {0x3F80, 0xC000, 0x0000};
  DequantizeRow(WeightFormat::kBF16, bf.data(), out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, 0.0f}));
}

TEST(CpuEmbeddingTest, LooksUpAndDequantizesRows) {
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kQ8_0, WeightFormat::kQ4_1}) {
    auto table = MakeWeights(format, 97, 64, 9);
    const std::vector<int32_t> ids = {0, 96, 5, 5, 17};
    std::vector<float> out(ids.size() * 64);
    EmbeddingLookup(table.view, ids, out);
    for (size_t t = 0; t < ids.size(); ++t) {
      std::vector<float> expected(64);
      DequantizeRow(format, table.view.Row(ids[t]), expected);
      EXPECT_TRUE(testing::BitEqual({out.data() + t * 64, 64}, expected));
    }
  }
}

TEST(CpuEmbeddingDeathTest, RejectsOutOfRangeIds) {
  auto table = MakeWeights(WeightFormat::kQ8_0, 4, 32, 1);
  std::vector<int32_t> ids = {4};
  std::vector<float> out(32);
  EXPECT_DEATH(EmbeddingLookup(table.view, ids, out), "token id out of range");
}

}  // namespace
}  // namespace tessera::kernels::cpu
