#include "kernels/cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/gguf/fp4_codec.h"
#include "common/util/check.h"
#include "common/util/half.h"

namespace tessera::kernels::cpu {
namespace {

constexpr int kHalfBlock = kQuantBlockSize / 2;

template <typename Block>
Block LoadBlock(const uint8_t* p) {  // blocks inside GGUF rows are not aligned
  Block b;
  std::memcpy(&b, p, sizeof(b));
  return b;
}

void DequantizeQ8_0(const uint8_t* row, int64_t num_blocks, float* out) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const auto block = LoadBlock<BlockQ8_0>(row + b * sizeof(BlockQ8_0));
    const float d = util::HalfToFloat(block.d);
    for (int j = 0; j < kQuantBlockSize; ++j) {
      out[b * kQuantBlockSize + j] = d * static_cast<float>(block.qs[j]);
    }
  }
}

void DequantizeQ4_0(const uint8_t* row, int64_t num_blocks, float* out) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const auto block = LoadBlock<BlockQ4_0>(row + b * sizeof(BlockQ4_0));
    const float d = util::HalfToFloat(block.d);
    float* dst = out + b * kQuantBlockSize;
    for (int j = 0; j < kHalfBlock; ++j) {
      dst[j] = d * static_cast<float>((block.qs[j] & 0x0F) - 8);
      dst[j + kHalfBlock] = d * static_cast<float>((block.qs[j] >> 4) - 8);
    }
  }
}

void DequantizeQ4_1(const uint8_t* row, int64_t num_blocks, float* out) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const auto block = LoadBlock<BlockQ4_1>(row + b * sizeof(BlockQ4_1));
    const float d = util::HalfToFloat(block.d);
    const float m = util::HalfToFloat(block.m);
    float* dst = out + b * kQuantBlockSize;
    for (int j = 0; j < kHalfBlock; ++j) {
      const float lo = d * static_cast<float>(block.qs[j] & 0x0F);  // exact
      const float hi = d * static_cast<float>(block.qs[j] >> 4);    // exact
      dst[j] = lo + m;
      dst[j + kHalfBlock] = hi + m;
    }
  }
}

float Fp4Value(uint8_t code, float scale_half) {
  return static_cast<float>(gguf::fp4::kE2M1Doubled[code]) * scale_half;  // exact
}

void DequantizeMxfp4(const uint8_t* row, int64_t num_blocks, float* out) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const auto block = LoadBlock<BlockMxfp4>(row + b * sizeof(BlockMxfp4));
    const float d = gguf::fp4::E8M0ToFloatHalf(block.e);
    float* dst = out + b * kQuantBlockSize;
    for (int j = 0; j < kHalfBlock; ++j) {
      dst[j] = Fp4Value(block.qs[j] & 0x0F, d);
      dst[j + kHalfBlock] = Fp4Value(block.qs[j] >> 4, d);
    }
  }
}

void DequantizeNvfp4(const uint8_t* row, int64_t num_blocks, float* out) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const auto block = LoadBlock<BlockNvfp4>(row + b * sizeof(BlockNvfp4));
    for (int s = 0; s < kNvfp4SubBlocks; ++s) {
      const float d = gguf::fp4::Ue4m3ToFloatHalf(block.d[s]);
      float* dst = out + b * 2 * kQuantBlockSize + 16 * s;
      for (int j = 0; j < 8; ++j) {
        dst[j] = Fp4Value(block.qs[8 * s + j] & 0x0F, d);
        dst[j + 8] = Fp4Value(block.qs[8 * s + j] >> 4, d);
      }
    }
  }
}

}  // namespace

void DequantizeRow(WeightFormat format, const void* row, std::span<float> out) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  const int64_t k = static_cast<int64_t>(out.size());
  const int64_t block = FormatBlockElements(format);
  TESSERA_CHECK(k % block == 0, "row length must be a multiple of the format's block size");
  switch (format) {
    case WeightFormat::kF32:
      std::memcpy(out.data(), bytes, static_cast<size_t>(k) * sizeof(float));
      return;
    case WeightFormat::kF16:
    case WeightFormat::kBF16:
      for (int64_t i = 0; i < k; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, sizeof(h));
        out[i] = format == WeightFormat::kF16 ? util::HalfToFloat(h) : util::Bf16ToFloat(h);
      }
      return;
    case WeightFormat::kQ8_0:
      return DequantizeQ8_0(bytes, k / block, out.data());
    case WeightFormat::kQ4_0:
      return DequantizeQ4_0(bytes, k / block, out.data());
    case WeightFormat::kQ4_1:
      return DequantizeQ4_1(bytes, k / block, out.data());
    case WeightFormat::kMxfp4:
      return DequantizeMxfp4(bytes, k / block, out.data());
    case WeightFormat::kNvfp4:
      return DequantizeNvfp4(bytes, k / block, out.data());
  }
}

}  // namespace tessera::kernels::cpu
