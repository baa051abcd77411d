// MXFP4 and NVFP4 decoding against blocks built byte by byte from the formats (ggml-common.h,
// docs/design/fp4-formats.md), and the scale conversions against literal ports of ggml's helpers.
// Expected values are worked out by hand in the comments.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/gguf/dequantize.h"
#include "common/gguf/fp4_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

using ::testing::ElementsAreArray;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Decode(GgmlType type, const std::vector<uint8_t>& bytes, uint64_t n) {
  auto out = DequantizeToF32(type, bytes, n);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<float>();
}

// The 16 E2M1 values by code (code 8, "-0", decodes to +0 as in ggml's table).
const std::vector<float> kE2M1 = {0,    0.5f, 1,  1.5f, 2,  3,  4,  6,
                                  0, -0.5f, -1, -1.5f, -2, -3, -4, -6};

std::vector<float> Scaled(const std::vector<float>& values, float scale) {
  std::vector<float> out;
  for (float v : values) out.push_back(v * scale);
  return out;
}

// MXFP4 block with e = 127 (scale 1) whose byte j is code j (low) and code 15 - j (high):
// elements 0..15 run through every code, elements 16..31 through them backwards.
TEST(DequantizeFp4Test, Mxfp4EveryCode) {
  std::vector<uint8_t> b = {127};
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
  ASSERT_EQ(b.size(), 17u);
  std::vector<float> expected = kE2M1;
  for (int j = 15; j >= 0; --j) expected.push_back(kE2M1[j]);
  const std::vector<float> out = Decode(GgmlType::kMxfp4, b, 32);
  EXPECT_THAT(out, ElementsAreArray(expected));
  EXPECT_FALSE(std::signbit(out[8]));  // code 8 is +0, not -0
}

// One block per scale byte; element j = code j (so element 1 = 0.5 * 2^(e-127), element 7 = 6 *
// 2^(e-127), element 15 = -6 * 2^(e-127)).
TEST(DequantizeFp4Test, Mxfp4Scales) {
  struct Case {
    uint8_t e;
    float one;  // the value of code 2 (E2M1 1.0): 2^(e - 127)
  };
  const Case cases[] = {
      {0, std::ldexp(1.0f, -127)},   // f32 subnormal scale (ggml: 0x00200000 = 2^-128, halved)
      {1, std::ldexp(1.0f, -126)},   // subnormal 2^-127 halved scale
      {2, std::ldexp(1.0f, -125)},   // first normal halved scale
      {120, 1.0f / 128},             // 2^-7
      {127, 1.0f},
      {130, 8.0f},
      {254, std::ldexp(1.0f, 127)},  // 6 * 2^127 overflows: inf, as ggml
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.e));
    std::vector<uint8_t> b = {c.e};
    for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(j));
    const std::vector<float> out = Decode(GgmlType::kMxfp4, b, 32);
    ASSERT_EQ(out.size(), 32u);
    EXPECT_EQ(out[1], 0.5f * c.one);
    EXPECT_EQ(out[2], c.one);
    EXPECT_EQ(out[9], -0.5f * c.one);
    EXPECT_EQ(out[7], c.e == 254 ? kInf : 6.0f * c.one);
    EXPECT_EQ(out[15], c.e == 254 ? -kInf : -6.0f * c.one);
    EXPECT_EQ(out[16], 0.0f);  // high nibbles are all code 0
  }
  // e = 255 (NaN in the OCP spec) is not special in ggml: halved scale 2^127, so code 1 (doubled
  // value 1) is 2^127 and code 2 (doubled value 2) already overflows.
  std::vector<uint8_t> b = {255, 0x21, 0x9A};  // byte 0: codes 1 / 2, byte 1: codes 10 / 9
  b.resize(17, 0);
  const std::vector<float> out = Decode(GgmlType::kMxfp4, b, 32);
  EXPECT_EQ(out[0], std::ldexp(1.0f, 127));
  EXPECT_EQ(out[16], kInf);
  EXPECT_EQ(out[1], -kInf);
  EXPECT_EQ(out[17], -std::ldexp(1.0f, 127));
}

// NVFP4: 4 scale bytes, then 4 sub-blocks of 8 bytes; byte j of sub-block s holds element 16s + j
// (low nibble) and 16s + j + 8 (high nibble). Here byte j = code j | code (8 + j) << 4, so each
// sub-block's elements run through codes 0..15 in order; the scales are
//   0x38 = 1.0 (exponent 7, mantissa 0), 0x00 = 0, 0x01 = 2^-9 (smallest subnormal),
//   0x7E = 448 (largest finite).
TEST(DequantizeFp4Test, Nvfp4LayoutAndScales) {
  std::vector<uint8_t> b = {0x38, 0x00, 0x01, 0x7E};
  for (int s = 0; s < 4; ++s) {
    for (int j = 0; j < 8; ++j) b.push_back(static_cast<uint8_t>(j | ((8 + j) << 4)));
  }
  ASSERT_EQ(b.size(), 36u);
  std::vector<float> expected = kE2M1;                                   // 0..15
  for (int j = 0; j < 16; ++j) expected.push_back(0.0f);                // 16..31
  for (float v : Scaled(kE2M1, std::ldexp(1.0f, -9))) expected.push_back(v);  // 32..47
  for (float v : Scaled(kE2M1, 448.0f)) expected.push_back(v);          // 48..63
  EXPECT_THAT(Decode(GgmlType::kNvfp4, b, 64), ElementsAreArray(expected));
}

// Sub-block order inside a block and block order in a row: a two-block row whose sub-blocks have
// distinct scales 1, 2, 4, ..., 128 (0x38 + 8t) and all codes 2 (value 1): element i = 2^(i / 16).
TEST(DequantizeFp4Test, Nvfp4SubBlockOrder) {
  std::vector<uint8_t> b;
  for (int block = 0; block < 2; ++block) {
    for (int s = 0; s < 4; ++s) b.push_back(static_cast<uint8_t>(0x38 + 8 * (4 * block + s)));
    for (int j = 0; j < 32; ++j) b.push_back(0x22);
  }
  const std::vector<float> out = Decode(GgmlType::kNvfp4, b, 128);
  ASSERT_EQ(out.size(), 128u);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(out[i], std::ldexp(1.0f, i / 16)) << i;
}

// Scale bytes ggml treats specially, read through code 2 (doubled value 2), which gives the
// scale's full UE4M3 value: 0x7F (E4M3 NaN) decodes to 0; bit 7 is ignored, so 0x80 is 0, 0xB8
// is 1.0 and 0xFF is exponent 15, mantissa 7 = 480 (not NaN, not 0).
TEST(DequantizeFp4Test, Nvfp4SpecialScaleBytes) {
  struct Case {
    uint8_t d;
    float value;
  };
  const Case cases[] = {
      {0x7F, 0.0f},   {0x80, 0.0f},
      {0xB8, 1.0f},   {0xFF, 480.0f},
      {0x07, 7.0f / 512},  // largest subnormal: 7 * 2^-9
      {0x08, 1.0f / 64},   // smallest normal: 2^-6
      {0x3F, 1.875f},      // exponent 7, mantissa 7
      {0x77, 240.0f},      // exponent 14, mantissa 7
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.d));
    std::vector<uint8_t> b = {c.d, c.d, c.d, c.d};
    b.resize(36, 0x22);
    const std::vector<float> out = Decode(GgmlType::kNvfp4, b, 64);
    ASSERT_EQ(out.size(), 64u);
    for (float v : out) ASSERT_EQ(v, c.value);
  }
}

// ggml's ggml_ue4m3_to_fp32 written out operation by operation (ggml-impl.h), for every byte.
float GgmlUe4m3ToFp32(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exp = (x >> 3) & 0xF;
  const int man = x & 0x7;
  const float raw = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                             : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return raw * 0.5f;
}

TEST(DequantizeFp4Test, ScaleConversionsMatchGgmlForEveryByte) {
  for (int x = 0; x < 256; ++x) {
    const auto byte = static_cast<uint8_t>(x);
    EXPECT_EQ(std::bit_cast<uint32_t>(fp4::Ue4m3ToFloatHalf(byte)),
              std::bit_cast<uint32_t>(GgmlUe4m3ToFp32(byte)))
        << x;
    // E8M0 halved: 2^(e - 128) exactly, subnormals included.
    EXPECT_EQ(fp4::E8M0ToFloatHalf(byte), std::ldexp(1.0f, x - 128)) << x;
  }
}

TEST(DequantizeFp4Test, Geometry) {
  EXPECT_TRUE(CanDequantize(GgmlType::kMxfp4));
  EXPECT_TRUE(CanDequantize(GgmlType::kNvfp4));
  // MXFP4: 17 bytes per 32; NVFP4: 36 bytes per 64.
  EXPECT_TRUE(DequantizeToF32(GgmlType::kMxfp4, std::vector<uint8_t>(34), 64).ok());
  EXPECT_TRUE(DequantizeToF32(GgmlType::kNvfp4, std::vector<uint8_t>(72), 128).ok());
  const struct {
    GgmlType type;
    size_t bytes;
    uint64_t elements;
  } bad[] = {
      {GgmlType::kMxfp4, 33, 64},  {GgmlType::kMxfp4, 17, 16},  // short; not a whole block
      {GgmlType::kNvfp4, 36, 32},  {GgmlType::kNvfp4, 35, 64},  // 32 is half a block; short
      {GgmlType::kNvfp4, 36, 96},
  };
  for (const auto& b : bad) {
    EXPECT_EQ(DequantizeToF32(b.type, std::vector<uint8_t>(b.bytes), b.elements).status().code(),
              absl::StatusCode::kInvalidArgument)
        << GgmlTypeName(b.type) << " " << b.bytes << " " << b.elements;
  }
}

}  // namespace
}  // namespace tessera::gguf
