// Dequantization against blocks built byte by byte from the format definitions (ggml-common.h).
// Expected values are worked out by hand in the comments; for the K-quants, every element is also
// checked against a per-element reading of the layout written independently of the decoder loops.
#include "common/gguf/dequantize.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

using ::testing::ElementsAreArray;

std::vector<float> Decode(GgmlType type, const std::vector<uint8_t>& bytes, uint64_t n) {
  auto out = DequantizeToF32(type, bytes, n);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<float>();
}

void PutU16(std::vector<uint8_t>* b, uint16_t v) {
  b->push_back(static_cast<uint8_t>(v));
  b->push_back(static_cast<uint8_t>(v >> 8));
}

// Nibble pattern used by the 4/5-bit blocks: byte j = j | (15 - j) << 4, so elements 0..15 count
// up 0..15 and elements 16..31 count down 15..0.
void PutRampNibbles(std::vector<uint8_t>* b) {
  for (int j = 0; j < 16; ++j) b->push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
}

TEST(DequantizeTest, F32F16Bf16) {
  const std::vector<float> f32 = {1.5f, -0.0f, std::numeric_limits<float>::infinity(), 1e-40f};
  std::vector<uint8_t> bytes(16);
  std::memcpy(bytes.data(), f32.data(), 16);
  const std::vector<float> out = Decode(GgmlType::kF32, bytes, 4);
  ASSERT_EQ(out.size(), 4u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(f32[i]));

  // F16: 0x3C00 = 1, 0xC000 = -2, 0x0001 = 2^-24 (subnormal), 0x7C00 = +inf.
  std::vector<uint8_t> f16;
  for (uint16_t h : {0x3C00, 0xC000, 0x0001, 0x7C00}) PutU16(&f16, h);
  EXPECT_THAT(Decode(GgmlType::kF16, f16, 4),
              ElementsAreArray(
                  {1.0f, -2.0f, std::ldexp(1.0f, -24), std::numeric_limits<float>::infinity()}));
  // BF16: the top half of an f32. 0x3F80 = 1, 0xC0A0 = -5, 0x3E20 = 0.15625.
  std::vector<uint8_t> bf16;
  for (uint16_t h : {0x3F80, 0xC0A0, 0x3E20}) PutU16(&bf16, h);
  EXPECT_THAT(Decode(GgmlType::kBF16, bf16, 3), ElementsAreArray({1.0f, -5.0f, 0.15625f}));
}

TEST(DequantizeTest, Q4_0) {
  // d = 0.5 (half 0x3800); x = (nibble - 8) * d.
  std::vector<uint8_t> b;
  PutU16(&b, 0x3800);
  PutRampNibbles(&b);
  ASSERT_EQ(b.size(), 18u);
  EXPECT_THAT(Decode(GgmlType::kQ4_0, b, 32),
              ElementsAreArray({-4.0f, -3.5f, -3.0f, -2.5f, -2.0f, -1.5f, -1.0f, -0.5f,  // 0..7
                                0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  2.5f,  3.0f,  3.5f,   // 8..15
                                3.5f,  3.0f,  2.5f,  2.0f,  1.5f,  1.0f,  0.5f,  0.0f,   // 15..8
                                -0.5f, -1.0f, -1.5f, -2.0f, -2.5f, -3.0f, -3.5f, -4.0f}));
}

TEST(DequantizeTest, Q4_1) {
  // d = 0.5 (0x3800), m = -1.0 (0xBC00); x = nibble * d + m. Low nibbles are elements 0..15,
  // high nibbles elements 16..31.
  std::vector<uint8_t> b;
  PutU16(&b, 0x3800);
  PutU16(&b, 0xBC00);
  PutRampNibbles(&b);
  ASSERT_EQ(b.size(), 20u);
  EXPECT_THAT(Decode(GgmlType::kQ4_1, b, 32),
              ElementsAreArray({-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f, 2.0f,  2.5f,  // 0..7
                                3.0f,  3.5f,  4.0f, 4.5f, 5.0f, 5.5f, 6.0f,  6.5f,  // 15 -> 6.5
                                6.5f,  6.0f,  5.5f, 5.0f, 4.5f, 4.0f, 3.5f,  3.0f,  // 16..23
                                2.5f,  2.0f,  1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f}));
}

TEST(DequantizeTest, Q5_0) {
  // d = 1.0 (0x3C00); qh = 0x80000001: the fifth bit is set for elements 0 and 31 only.
  // Nibbles: byte j = j | j << 4. x = ((nibble | bit << 4) - 16) * d.
  std::vector<uint8_t> b;
  PutU16(&b, 0x3C00);
  for (uint8_t v : {0x01, 0x00, 0x00, 0x80}) b.push_back(v);
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(j | (j << 4)));
  ASSERT_EQ(b.size(), 22u);
  EXPECT_THAT(Decode(GgmlType::kQ5_0, b, 32),
              ElementsAreArray({0.0f,   -15.0f, -14.0f, -13.0f, -12.0f, -11.0f, -10.0f, -9.0f,
                                -8.0f,  -7.0f,  -6.0f,  -5.0f,  -4.0f,  -3.0f,  -2.0f,  -1.0f,
                                -16.0f, -15.0f, -14.0f, -13.0f, -12.0f, -11.0f, -10.0f, -9.0f,
                                -8.0f,  -7.0f,  -6.0f,  -5.0f,  -4.0f,  -3.0f,  -2.0f,  15.0f}));
}

TEST(DequantizeTest, Q5_1) {
  // d = 0.5 (0x3800), m = 1.0 (0x3C00); qh = 0x0000AAAA sets the fifth bit of the odd elements
  // among 0..15. Ramp nibbles. x = code * d + m, e.g. element 1: (1 + 16) * 0.5 + 1 = 9.5.
  std::vector<uint8_t> b;
  PutU16(&b, 0x3800);
  PutU16(&b, 0x3C00);
  for (uint8_t v : {0xAA, 0xAA, 0x00, 0x00}) b.push_back(v);
  PutRampNibbles(&b);
  ASSERT_EQ(b.size(), 24u);
  EXPECT_THAT(Decode(GgmlType::kQ5_1, b, 32),
              ElementsAreArray({1.0f, 9.5f,  2.0f, 10.5f, 3.0f, 11.5f, 4.0f, 12.5f,  // 0..7
                                5.0f, 13.5f, 6.0f, 14.5f, 7.0f, 15.5f, 8.0f, 16.5f,  // 8..15
                                8.5f, 8.0f,  7.5f, 7.0f,  6.5f, 6.0f,  5.5f, 5.0f,   // 16..23
                                4.5f, 4.0f,  3.5f, 3.0f,  2.5f, 2.0f,  1.5f, 1.0f}));
}

TEST(DequantizeTest, Q8_0) {
  // d = 0.25 (0x3400); x = int8 * d. Two blocks: the second has d = -2 (0xC000).
  std::vector<uint8_t> b;
  PutU16(&b, 0x3400);
  std::vector<float> expected;
  const int8_t first[] = {-128, -1, 0, 1, 127};
  for (int8_t q : first) {
    b.push_back(static_cast<uint8_t>(q));
    expected.push_back(q * 0.25f);  // -32, -0.25, 0, 0.25, 31.75
  }
  for (int k = 0; k < 27; ++k) {
    b.push_back(static_cast<uint8_t>(k - 13));
    expected.push_back((k - 13) * 0.25f);
  }
  PutU16(&b, 0xC000);
  for (int k = 0; k < 32; ++k) {
    b.push_back(static_cast<uint8_t>(k));
    expected.push_back(k * -2.0f);
  }
  ASSERT_EQ(b.size(), 68u);
  EXPECT_THAT(Decode(GgmlType::kQ8_0, b, 64), ElementsAreArray(expected));
  EXPECT_EQ(expected[0], -32.0f);
  EXPECT_EQ(expected[4], 31.75f);
}

// ---- K-quants: 256-element super-blocks ----

float Half(uint16_t h) { return HalfToFloat(h); }

// Q4_K / Q5_K scale bytes used below and the (scale, min) pairs they encode:
//   sub-block: 0      1      2      3      4       5       6       7
//   (sc, m):  (1,5)  (2,6)  (3,7)  (4,8)  (17,2)  (3,20)  (53,6)  (7,40)
// e.g. sub-block 4: sc = (q[8] & 15) | (q[0] >> 6) << 4 = 1 | 1 << 4 = 17,
//                   m  = (q[8] >> 4) | (q[4] >> 6) << 4 = 2 | 0 = 2.
const uint8_t kK4Scales[12] = {0x41, 0x02, 0xC3, 0x04, 0x05, 0x46,
                               0x07, 0x88, 0x21, 0x43, 0x65, 0x87};
const int kK4Sc[8] = {1, 2, 3, 4, 17, 3, 53, 7};
const int kK4Min[8] = {5, 6, 7, 8, 2, 20, 6, 40};

std::vector<uint8_t> Pattern(size_t n, int multiplier) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * multiplier);
  return out;
}

TEST(DequantizeTest, Q4_K) {
  // {d = 0.5, dmin = 0.25, scales[12], qs[128] with qs[i] = 7 i mod 256}.
  std::vector<uint8_t> b;
  PutU16(&b, 0x3800);
  PutU16(&b, 0x3400);
  b.insert(b.end(), kK4Scales, kK4Scales + 12);
  const std::vector<uint8_t> qs = Pattern(128, 7);
  b.insert(b.end(), qs.begin(), qs.end());
  ASSERT_EQ(b.size(), 144u);
  const std::vector<float> out = Decode(GgmlType::kQ4_K, b, 256);
  ASSERT_EQ(out.size(), 256u);
  // Element i lies in sub-block g = i / 32; sub-blocks 2p and 2p+1 share qs[32p .. 32p+31], the
  // even one using low nibbles, the odd one high nibbles. x = d * sc * q - dmin * m.
  for (int i = 0; i < 256; ++i) {
    const int g = i / 32, byte = qs[32 * (g / 2) + i % 32];
    const int q = g % 2 == 0 ? byte & 15 : byte >> 4;
    EXPECT_EQ(out[i], Half(0x3800) * kK4Sc[g] * q - Half(0x3400) * kK4Min[g]) << i;
  }
  EXPECT_EQ(out[0], -1.25f);   // q = 0: -0.25 * 5
  EXPECT_EQ(out[37], 0.5f);    // qs[5] = 35 = 0x23, high nibble 2: 0.5 * 2 * 2 - 0.25 * 6
  EXPECT_EQ(out[131], 42.0f);  // qs[67] = 213 = 0xD5, low 5: 0.5 * 17 * 5 - 0.25 * 2
  EXPECT_EQ(out[255], 14.5f);  // qs[127] = 121 = 0x79, high 7: 0.5 * 7 * 7 - 0.25 * 40
}

TEST(DequantizeTest, Q5_K) {
  // {d = 0.5, dmin = 0.25, scales[12], qh[32] = 37 l, qs[128] = 7 i}; element i of sub-block g
  // takes its fifth bit from bit g of qh[i % 32].
  std::vector<uint8_t> b;
  PutU16(&b, 0x3800);
  PutU16(&b, 0x3400);
  b.insert(b.end(), kK4Scales, kK4Scales + 12);
  const std::vector<uint8_t> qh = Pattern(32, 37), qs = Pattern(128, 7);
  b.insert(b.end(), qh.begin(), qh.end());
  b.insert(b.end(), qs.begin(), qs.end());
  ASSERT_EQ(b.size(), 176u);
  const std::vector<float> out = Decode(GgmlType::kQ5_K, b, 256);
  ASSERT_EQ(out.size(), 256u);
  for (int i = 0; i < 256; ++i) {
    const int g = i / 32, l = i % 32, byte = qs[32 * (g / 2) + l];
    const int q = (g % 2 == 0 ? byte & 15 : byte >> 4) + 16 * ((qh[l] >> g) & 1);
    EXPECT_EQ(out[i], Half(0x3800) * kK4Sc[g] * q - Half(0x3400) * kK4Min[g]) << i;
  }
  EXPECT_EQ(out[1], 10.25f);   // qs[1] = 7, qh[1] = 37 bit 0 set: q = 23; 0.5 * 23 - 1.25
  EXPECT_EQ(out[131], 42.0f);  // qh[3] = 111 = 0x6F has bit 4 clear: same as Q4_K
}

TEST(DequantizeTest, Q6_K) {
  // {ql[128] = 11 i, qh[64] = 29 i, scales[16] = 1, -2, 3, -4, ..., d = 0.5}.
  // In each 128-element half, element 32k + l (k = 0..3) has low 4 bits from ql[l] (k = 0) /
  // ql[l + 32] (k = 1) low nibbles, or their high nibbles (k = 2, 3), and high 2 bits from
  // qh[l] bits 2k..2k+1; q is biased by 32 and its scale is scales[l / 16 + 2k] (+8 per half).
  std::vector<uint8_t> ql = Pattern(128, 11), qh = Pattern(64, 29);
  std::vector<int8_t> sc(16);
  for (int k = 0; k < 16; ++k) sc[k] = static_cast<int8_t>(k % 2 == 0 ? k + 1 : -(k + 1));
  std::vector<uint8_t> b = ql;
  b.insert(b.end(), qh.begin(), qh.end());
  for (int8_t s : sc) b.push_back(static_cast<uint8_t>(s));
  PutU16(&b, 0x3800);
  ASSERT_EQ(b.size(), 210u);
  const std::vector<float> out = Decode(GgmlType::kQ6_K, b, 256);
  ASSERT_EQ(out.size(), 256u);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    const int low_byte = ql[64 * h + l + 32 * (k % 2)];
    const int low = k < 2 ? low_byte & 15 : low_byte >> 4;
    const int high = (qh[32 * h + l] >> (2 * k)) & 3;
    const int q = (low | high << 4) - 32;
    EXPECT_EQ(out[i], Half(0x3800) * sc[8 * h + l / 16 + 2 * k] * q) << i;
  }
  EXPECT_EQ(out[0], -16.0f);     // low 0, high 0: q = -32, scale 1: 0.5 * 1 * -32
  EXPECT_EQ(out[33], 40.5f);     // ql[33] = 107 (low 11), qh[1] = 29 (bits 2..3 = 3): q = 27,
                                 // scale scales[2] = 3: 0.5 * 3 * 27
  EXPECT_EQ(out[200], -201.5f);  // ql[72] = 24 (high 1), qh[40] = 136 (bits 4..5 = 0): q = -31,
                                 // scale scales[12] = 13: 0.5 * 13 * -31
}

TEST(DequantizeTest, Q8_K) {
  // {d = 0.5 as a full f32, qs[256] = i - 128, bsums[16] (not used for decoding)}.
  std::vector<uint8_t> b = {0x00, 0x00, 0x00, 0x3F};  // 0x3F000000 = 0.5f
  std::vector<float> expected;
  for (int i = 0; i < 256; ++i) {
    b.push_back(static_cast<uint8_t>(i - 128));
    expected.push_back((i - 128) * 0.5f);  // -64, -63.5, ..., 63.5
  }
  for (int i = 0; i < 32; ++i) b.push_back(0xAB);
  ASSERT_EQ(b.size(), 292u);
  EXPECT_THAT(Decode(GgmlType::kQ8_K, b, 256), ElementsAreArray(expected));
}

TEST(DequantizeTest, Q2_K) {
  // {scales[16]: low nibble scale, high nibble min; qs[64] = 13 i; d = 0.5; dmin = 0.25}.
  // Element i uses scales[i / 16]; in each 128-element half, element 32s + l takes bits 2s..2s+1
  // of qs[32 h + l]. x = d * (sc & 15) * q - dmin * (sc >> 4).
  std::vector<uint8_t> scales(16);
  for (int k = 0; k < 16; ++k) scales[k] = static_cast<uint8_t>((k * 5 % 16) | ((k * 3 % 16) << 4));
  const std::vector<uint8_t> qs = Pattern(64, 13);
  std::vector<uint8_t> b = scales;
  b.insert(b.end(), qs.begin(), qs.end());
  PutU16(&b, 0x3800);
  PutU16(&b, 0x3400);
  ASSERT_EQ(b.size(), 84u);
  const std::vector<float> out = Decode(GgmlType::kQ2_K, b, 256);
  ASSERT_EQ(out.size(), 256u);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, s = (i % 128) / 32, l = i % 32;
    const int q = (qs[32 * h + l] >> (2 * s)) & 3;
    const int sc = scales[i / 16];
    EXPECT_EQ(out[i], Half(0x3800) * (sc & 15) * q - Half(0x3400) * (sc >> 4)) << i;
  }
  EXPECT_EQ(out[17], 1.75f);   // scales[1] = 0x35, qs[17] = 221 (bits 0..1 = 1): 2.5 - 0.75
  EXPECT_EQ(out[200], -1.0f);  // scales[12] = 0x4C, qs[40] = 8 (bits 4..5 = 0): 0 - 0.25 * 4
}

TEST(DequantizeTest, Q3_K) {
  // {hmask[32] = 19 l, qs[64] = 13 i, scales[12], d = 0.5}. Scale j (biased by 32) has its low
  // nibble in scales[j] (j < 8, low nibble) or scales[j - 8] (high nibble) and its top 2 bits in
  // scales[8 + j % 4] at bit 2 (j / 4). Element i: h = i / 128, s = (i % 128) / 32, l = i % 32;
  // q = ((qs[32 h + l] >> 2 s) & 3) - (bit (4 h + s) of hmask[l] ? 0 : 4); x = d * scale * q.
  const uint8_t scales[12] = {0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC,
                              0xDE, 0xF0, 0x1B, 0x2C, 0x3D, 0x4E};
  const std::vector<uint8_t> hmask = Pattern(32, 19), qs = Pattern(64, 13);
  std::vector<uint8_t> b = hmask;
  b.insert(b.end(), qs.begin(), qs.end());
  b.insert(b.end(), scales, scales + 12);
  PutU16(&b, 0x3800);
  ASSERT_EQ(b.size(), 110u);
  const std::vector<float> out = Decode(GgmlType::kQ3_K, b, 256);
  ASSERT_EQ(out.size(), 256u);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 16, h = i / 128, s = (i % 128) / 32, l = i % 32;
    const int low = j < 8 ? scales[j] & 15 : scales[j - 8] >> 4;
    const int scale = (low | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
    const int q = ((qs[32 * h + l] >> (2 * s)) & 3) - (((hmask[l] >> (4 * h + s)) & 1) ? 0 : 4);
    EXPECT_EQ(out[i], Half(0x3800) * scale * q) << i;
  }
  EXPECT_EQ(out[0], -36.0f);   // scale 0 = (2 | 3 << 4) - 32 = 18; q = 0 - 4: 0.5 * 18 * -4
  EXPECT_EQ(out[21], -14.0f);  // scale 1 = 4 - 32 = -28; qs[21] = 17 (q 1), hmask[21] = 143
                               // (bit 0 set): 0.5 * -28 * 1
}

TEST(DequantizeTest, SizeAndTypeErrors) {
  const std::vector<uint8_t> block(18);
  EXPECT_EQ(DequantizeToF32(GgmlType::kQ4_0, block, 16).status().code(),
            absl::StatusCode::kInvalidArgument);  // not whole blocks
  EXPECT_EQ(DequantizeToF32(GgmlType::kQ4_0, block, 64).status().code(),
            absl::StatusCode::kInvalidArgument);  // needs 36 bytes
  // A huge element count is rejected before allocating its output.
  EXPECT_EQ(DequantizeToF32(GgmlType::kF32, block, uint64_t{1} << 62).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> small(16);
  EXPECT_EQ(DequantizeToF32(GgmlType::kQ4_0, block, 32, small).code(),
            absl::StatusCode::kInvalidArgument);  // destination too small
  EXPECT_EQ(DequantizeToF32(GgmlType::kI32, std::vector<uint8_t>(4), 1).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(DequantizeToF32(static_cast<GgmlType>(99), block, 32).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(DequantizeToF32(GgmlType::kQ4_0, {}, 0).ok());
  for (GgmlType t :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
        GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K,
        GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_K}) {
    EXPECT_TRUE(CanDequantize(t)) << GgmlTypeName(t);
  }
  for (GgmlType t : {GgmlType::kQ8_1, GgmlType::kI8, GgmlType::kI32, GgmlType::kF64}) {
    EXPECT_FALSE(CanDequantize(t)) << GgmlTypeName(t);
  }
}

}  // namespace
}  // namespace tessera::gguf
