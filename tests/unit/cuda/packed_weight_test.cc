// The host half of the packed-weight GEMMs (kernels/cuda/packed_weight.h):
//   - GGUF NVFP4 / MXFP4 blocks repacked (nibble order regrouped, UE4M3 -> E4M3) dequantize to
//     ggml's values over every representable scale byte;
//   - GGUF Q8_0 / Q4_0 / Q4_1 / Q4_K rows repacked into the planar layout dequantize to exactly
//     common/gguf's DequantizeToF32 (ggml's decoders), bit for bit, on random blocks with random
//     finite f16 scales (subnormals and the largest halves included);
//   - NVFP4 (ModelOpt tensors) and MXFP4 (planar codes + scales) dequantize to a per-element
//     reference written here from the formulas, bit for bit, over every code and scale byte;
//   - the E2M1 / E4M3 / E8M0 decoders on hand-checked values (E4M3 subnormals, 448, NaN);
//   - shapes, sizes and types the repack must refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/gguf/dequantize.h"
#include "common/gguf/ggml_type.h"
#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda {
namespace {

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

uint16_t RandomFiniteHalf(std::mt19937& rng) {
  for (;;) {
    const auto bits = static_cast<uint16_t>(rng());
    if ((bits & 0x7C00) != 0x7C00) return bits;
  }
}

// n rows of k elements of `type`: random bytes, every f16 field (d, m, dmin) a finite half.
std::vector<uint8_t> RandomGgufRows(gguf::GgmlType type, int n, int k, std::mt19937& rng) {
  const gguf::GgmlTypeInfo& info = gguf::GetGgmlTypeInfo(type);
  const int64_t blocks = int64_t{n} * k / info.block_size;
  std::vector<uint8_t> bytes(blocks * info.type_size);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const int halves = type == gguf::GgmlType::kQ8_0 || type == gguf::GgmlType::kQ4_0 ? 1 : 2;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int h = 0; h < halves; ++h) {
      const uint16_t half = RandomFiniteHalf(rng);
      std::memcpy(&bytes[b * info.type_size + 2 * h], &half, 2);
    }
  }
  return bytes;
}

TEST(PackedWeightTest, GgufRepackDequantizesAsGgmlBitForBit) {
  std::mt19937 rng(1201);
  for (gguf::GgmlType type : {gguf::GgmlType::kQ8_0, gguf::GgmlType::kQ4_0,
                              gguf::GgmlType::kQ4_1, gguf::GgmlType::kQ4_K}) {
    for (auto [n, k] : {std::pair{8, 256}, {24, 512}, {16, 1280}}) {
      const std::vector<uint8_t> rows = RandomGgufRows(type, n, k, rng);
      absl::StatusOr<PackedWeight> packed = PackGgufRows(type, rows, n, k);
      ASSERT_TRUE(packed.ok()) << packed.status();
      absl::StatusOr<std::vector<float>> expected =
          gguf::DequantizeToF32(type, rows, uint64_t(n) * k);
      ASSERT_TRUE(expected.ok()) << expected.status();
      const std::vector<float> got = DequantizePacked(*packed);
      ASSERT_EQ(got.size(), expected->size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(SameBits(got[i], (*expected)[i]))
            << gguf::GgmlTypeName(type) << " [" << n << ", " << k << "] element " << i << ": "
            << got[i] << " vs " << (*expected)[i];
      }
    }
  }
}

// GGUF NVFP4 / MXFP4 blocks: every scale byte ggml decodes to an E4M3 / E8M0 value (all but
// NVFP4 0xFF and MXFP4 255, which the repack refuses), random codes. Equal to ggml's decoding
// value for value (its code 8 is +0, the planar E2M1's -0).
TEST(PackedWeightTest, GgufFp4RepackDequantizesAsGgml) {
  std::mt19937 rng(1204);
  for (gguf::GgmlType type : {gguf::GgmlType::kNvfp4, gguf::GgmlType::kMxfp4}) {
    const gguf::GgmlTypeInfo& info = gguf::GetGgmlTypeInfo(type);
    const int n = 16, k = 1024;
    std::vector<uint8_t> rows(size_t(n) * k / info.block_size * info.type_size);
    for (uint8_t& b : rows) b = static_cast<uint8_t>(rng());
    int scale_byte = 0;  // walks every allowed byte
    for (size_t block = 0; block < rows.size() / info.type_size; ++block) {
      uint8_t* scales = &rows[block * info.type_size];
      for (int s = 0; s < (type == gguf::GgmlType::kNvfp4 ? 4 : 1); ++s) {
        scales[s] = static_cast<uint8_t>(scale_byte++ % 255);  // never 0xFF
      }
    }
    absl::StatusOr<PackedWeight> packed = PackGgufRows(type, rows, n, k);
    ASSERT_TRUE(packed.ok()) << packed.status();
    absl::StatusOr<std::vector<float>> expected = gguf::DequantizeToF32(type, rows, uint64_t(n) * k);
    ASSERT_TRUE(expected.ok()) << expected.status();
    const std::vector<float> got = DequantizePacked(*packed);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i] == (*expected)[i] || (std::isnan(got[i]) && std::isnan((*expected)[i])))
          << gguf::GgmlTypeName(type) << " element " << i << ": " << got[i] << " vs "
          << (*expected)[i];
    }
    rows[0] = 0xFF;  // NVFP4: 480; MXFP4: 2^128
    EXPECT_FALSE(PackGgufRows(type, rows, n, k).ok()) << gguf::GgmlTypeName(type);
  }
}

// The formats from their definitions, written independently of packed_weight.cc.
double ReferenceE2M1(unsigned code) {
  const int exponent = (code >> 1) & 3, mantissa = code & 1;
  const double magnitude =
      exponent == 0 ? 0.5 * mantissa : (1.0 + 0.5 * mantissa) * std::pow(2.0, exponent - 1);
  return (code & 8) ? -magnitude : magnitude;
}
double ReferenceE4M3(unsigned bits) {
  const int exponent = (bits >> 3) & 15, mantissa = bits & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent == 0 ? std::pow(2.0, -6) * (mantissa / 8.0)
                                         : std::pow(2.0, exponent - 7) * (1.0 + mantissa / 8.0);
  return (bits & 0x80) ? -magnitude : magnitude;
}
double ReferenceE8M0(unsigned bits) {
  return bits == 255 ? std::numeric_limits<double>::quiet_NaN() : std::pow(2.0, int(bits) - 127);
}

TEST(PackedWeightTest, SmallFloatDecodersMatchHandCheckedValues) {
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (unsigned c = 0; c < 16; ++c) {
    EXPECT_TRUE(SameBits(E2M1ToFloat(c), e2m1[c])) << c;
    EXPECT_EQ(ReferenceE2M1(c), e2m1[c]) << c;
  }
  const std::pair<uint8_t, float> e4m3[] = {
      {0x00, 0.0f},           {0x01, 0x1p-9f},  {0x07, 7 * 0x1p-9f}, {0x08, 0x1p-6f},
      {0x09, 1.125f * 0x1p-6f}, {0x38, 1.0f},   {0x3C, 1.5f},        {0x40, 2.0f},
      {0x7E, 448.0f},         {0x80, -0.0f},    {0x81, -0x1p-9f},    {0xFE, -448.0f}};
  for (auto [bits, value] : e4m3) {
    EXPECT_TRUE(SameBits(E4M3ToFloat(bits), value)) << int(bits);
    EXPECT_EQ(ReferenceE4M3(bits), value) << int(bits);
  }
  EXPECT_TRUE(std::isnan(E4M3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(E4M3ToFloat(0xFF)));
  const std::pair<uint8_t, float> e8m0[] = {{0, 0x1p-127f}, {1, 0x1p-126f}, {126, 0.5f},
                                            {127, 1.0f},    {128, 2.0f},    {254, 0x1p127f}};
  for (auto [bits, value] : e8m0) {
    EXPECT_TRUE(SameBits(E8M0ToFloat(bits), value)) << int(bits);
    EXPECT_EQ(ReferenceE8M0(bits), value) << int(bits);
  }
  EXPECT_TRUE(std::isnan(E8M0ToFloat(255)));
}

std::vector<uint8_t> RandomBytes(size_t count, std::mt19937& rng) {
  std::vector<uint8_t> bytes(count);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

// w = e2m1(q)·scale(s) [·tensor_scale], in f32 with one rounding per product, from the
// reference decoders (exact in double for these small formats).
void ExpectFp4Reference(const PackedWeight& w, double (*scale_of)(unsigned), float tensor_scale) {
  const int group = w.scheme == PackedScheme::kNvfp4 ? 16 : 32;
  const std::vector<float> got = DequantizePacked(w);
  for (int row = 0; row < w.n; ++row) {
    for (int e = 0; e < w.k; ++e) {
      const unsigned q = (w.codes[(int64_t{row} * w.k + e) / 2] >> (4 * (e & 1))) & 15;
      const double scale = scale_of(w.scales[int64_t{row} * (w.k / group) + e / group]);
      float expected = static_cast<float>(ReferenceE2M1(q)) * static_cast<float>(scale);
      if (w.scheme == PackedScheme::kNvfp4) expected = expected * tensor_scale;
      const float value = got[int64_t{row} * w.k + e];
      ASSERT_TRUE(SameBits(value, expected) || (std::isnan(value) && std::isnan(expected)))
          << "row " << row << " element " << e << ": " << value << " vs " << expected;
    }
  }
}

TEST(PackedWeightTest, Nvfp4AndMxfp4DequantizeAsTheirDefinitions) {
  std::mt19937 rng(1202);
  const int n = 16, k = 512;
  for (float tensor_scale : {1.0f, 0.0123f, 3.0e-5f}) {
    const std::vector<uint8_t> codes = RandomBytes(n * k / 2, rng);
    const std::vector<uint8_t> scales = RandomBytes(n * k / 16, rng);  // every E4M3, NaN too
    absl::StatusOr<PackedWeight> nvfp4 = PackPlanar(PackedScheme::kNvfp4, n, k, codes, scales, {}, {}, tensor_scale);
    ASSERT_TRUE(nvfp4.ok()) << nvfp4.status();
    EXPECT_EQ(nvfp4->codes, codes);
    EXPECT_EQ(nvfp4->scales, scales);
    ExpectFp4Reference(*nvfp4, ReferenceE4M3, tensor_scale);
  }
  const std::vector<uint8_t> codes = RandomBytes(n * k / 2, rng);
  std::vector<uint8_t> scales = RandomBytes(n * k / 32, rng);  // 2^-127 .. 2^127 and NaN
  scales[0] = 0, scales[1] = 255, scales[2] = 254;
  absl::StatusOr<PackedWeight> mxfp4 = PackPlanar(PackedScheme::kMxfp4, n, k, codes, scales);
  ASSERT_TRUE(mxfp4.ok()) << mxfp4.status();
  ExpectFp4Reference(*mxfp4, ReferenceE8M0, 1.0f);
}

TEST(PackedWeightTest, RefusesShapesSizesAndTypesItCannotPack) {
  std::mt19937 rng(1203);
  const std::vector<uint8_t> q4k = RandomGgufRows(gguf::GgmlType::kQ4_K, 8, 256, rng);
  EXPECT_TRUE(PackGgufRows(gguf::GgmlType::kQ4_K, q4k, 8, 256).ok());
  EXPECT_FALSE(PackGgufRows(gguf::GgmlType::kQ4_K, q4k, 16, 128).ok());    // k % 256
  EXPECT_FALSE(PackGgufRows(gguf::GgmlType::kQ4_K, q4k, 4, 512).ok());     // n % 8
  EXPECT_FALSE(PackGgufRows(gguf::GgmlType::kQ4_K, std::span(q4k).first(100), 8, 256).ok());
  EXPECT_FALSE(PackGgufRows(gguf::GgmlType::kQ6_K, q4k, 8, 256).ok());     // no packed form
  const std::vector<uint8_t> q8 = RandomGgufRows(gguf::GgmlType::kQ8_0, 8, 96, rng);
  EXPECT_FALSE(PackGgufRows(gguf::GgmlType::kQ8_0, q8, 8, 96).ok());       // k % 64
  const std::vector<uint8_t> codes(8 * 64 / 2), scales(8 * 2);
  EXPECT_TRUE(PackPlanar(PackedScheme::kMxfp4, 8, 64, codes, scales).ok());
  EXPECT_FALSE(PackPlanar(PackedScheme::kMxfp4, 8, 64, codes, std::span(scales).first(15)).ok());
  EXPECT_FALSE(PackPlanar(PackedScheme::kQ4_1, 8, 64, codes, scales).ok());  // sizes: f16, mins
  EXPECT_FALSE(PackPlanar(static_cast<PackedScheme>(17), 8, 64, codes, scales).ok());
}

}  // namespace
}  // namespace tessera::cuda
