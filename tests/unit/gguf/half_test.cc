// IEEE half and bfloat16 conversions: hand-checked bit patterns (normals, subnormals, signed
// zeros, inf, NaN), round-to-nearest-even ties, and exhaustive round trips.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "common/gguf/dequantize.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(HalfTest, DecodesHandPickedPatterns) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);  // exponent 15 (bias), mantissa 0
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x3800), 0.5f);
  // sign 0, exponent 13, mantissa 0x155: 2^-2 * (1 + 341/1024) = 0.333251953125
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);                  // largest finite half
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(HalfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(std::bit_cast<uint32_t>(HalfToFloat(0x0000)), 0x00000000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(HalfToFloat(0x8000)), 0x80000000u);  // -0
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7C01)));  // signalling NaN stays NaN
  EXPECT_TRUE(std::isnan(HalfToFloat(0xFFFF)));
}

TEST(HalfTest, EncodesWithRoundToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  // 1 + 2^-11 is halfway between 1 (even mantissa) and 1 + 2^-10: ties go to even.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  // Mantissa carry into the exponent: 2 - 2^-12 rounds up to 2.0.
  EXPECT_EQ(FloatToHalf(2.0f - std::ldexp(1.0f, -12)), 0x4000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // tie between 65504 (odd) and 65536 -> inf
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  // Subnormals: units of 2^-24.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie 0 / 1 -> 0 (even)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);  // above the tie
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // tie 1 / 2 -> 2 (even)
  EXPECT_EQ(FloatToHalf(std::ldexp(5.0f, -25)), 0x0002);  // tie 2 / 3 -> 2 (even)
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -30)), 0x8000);    // underflow keeps the sign
  EXPECT_EQ(FloatToHalf(FromBits(0x00000001)), 0x0000);      // float subnormal
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  // A NaN whose payload lives only in low bits must not turn into inf.
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(FromBits(0x7F800001)))));
}

TEST(HalfTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
    } else {
      EXPECT_EQ(FloatToHalf(f), h) << h;
    }
  }
}

#if defined(__FLT16_MAX__)
// The compiler's _Float16 conversion is an independent round-to-nearest-even implementation.
TEST(HalfTest, MatchesCompilerFloat16OnRandomFloats) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 200000; ++i) {
    // Bias the exponent towards the half range so subnormals and overflow are well covered.
    const uint32_t bits = (rng() & 0x807FFFFF) | ((96 + rng() % 50) << 23);
    const float f = FromBits(bits);
    const _Float16 expected = static_cast<_Float16>(f);
    EXPECT_EQ(FloatToHalf(f), std::bit_cast<uint16_t>(expected)) << std::hex << bits;
    EXPECT_EQ(HalfToFloat(std::bit_cast<uint16_t>(expected)), static_cast<float>(expected));
  }
}
#endif

TEST(Bf16Test, ConvertsHandPickedPatterns) {
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC0A0), -5.0f);
  EXPECT_EQ(Bf16ToFloat(0x0001), FromBits(0x00010000));  // subnormal survives
  EXPECT_EQ(Bf16ToFloat(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Bf16ToFloat(0x7FC0)));
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(FromBits(0x3F808000)), 0x3F80);  // tie, even stays
  EXPECT_EQ(FloatToBf16(FromBits(0x3F818000)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBf16(FromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(FloatToBf16(FromBits(0x00018000)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(FloatToBf16(FromBits(0x7F7FFFFF)), 0x7F80);  // FLT_MAX rounds to inf
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0x7F800001)))));
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBf16(f), b);
    }
  }
}

}  // namespace
}  // namespace tessera::gguf
