#include "kernels/cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/util/check.h"
#include "kernels/cpu/half.h"

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
    const float d = HalfToFloat(block.d);
    for (int j = 0; j < kQuantBlockSize; ++j) {
      out[b * kQuantBlockSize + j] = d * static_cast<float>(block.qs[j]);
    }
  }
}

void DequantizeQ4_0(const uint8_t* row, int64_t num_blocks, float* out) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const auto block = LoadBlock<BlockQ4_0>(row + b * sizeof(BlockQ4_0));
    const float d = HalfToFloat(block.d);
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
    const float d = HalfToFloat(block.d);
    const float m = HalfToFloat(block.m);
    float* dst = out + b * kQuantBlockSize;
    for (int j = 0; j < kHalfBlock; ++j) {
      const float lo = d * static_cast<float>(block.qs[j] & 0x0F);  // exact
      const float hi = d * static_cast<float>(block.qs[j] >> 4);    // exact
      dst[j] = lo + m;
      dst[j + kHalfBlock] = hi + m;
    }
  }
}

void CheckBlocks(size_t num_values, size_t num_blocks) {
  TESSERA_CHECK(num_values % kQuantBlockSize == 0, "row length must be a multiple of 32");
  TESSERA_CHECK(num_blocks >= num_values / kQuantBlockSize, "output has too few blocks");
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
        out[i] = format == WeightFormat::kF16 ? HalfToFloat(h) : Bf16ToFloat(h);
      }
      return;
    case WeightFormat::kQ8_0:
      return DequantizeQ8_0(bytes, k / block, out.data());
    case WeightFormat::kQ4_0:
      return DequantizeQ4_0(bytes, k / block, out.data());
    case WeightFormat::kQ4_1:
      return DequantizeQ4_1(bytes, k / block, out.data());
  }
}

void QuantizeRowQ8_0(std::span<const float> x, std::span<BlockQ8_0> out) {
  CheckBlocks(x.size(), out.size());
  for (size_t b = 0; b < x.size() / kQuantBlockSize; ++b) {
    const float* v = x.data() + b * kQuantBlockSize;
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlockSize; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = FloatToHalf(d);
    for (int j = 0; j < kQuantBlockSize; ++j) {
      out[b].qs[j] = static_cast<int8_t>(std::round(v[j] * id));
    }
  }
}

void QuantizeRowQ4_0(std::span<const float> x, std::span<BlockQ4_0> out) {
  CheckBlocks(x.size(), out.size());
  for (size_t b = 0; b < x.size() / kQuantBlockSize; ++b) {
    const float* v = x.data() + b * kQuantBlockSize;
    float amax = 0.0f;
    float max = 0.0f;  // the value with the largest magnitude, sign kept
    for (int j = 0; j < kQuantBlockSize; ++j) {
      if (std::fabs(v[j]) > amax) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = FloatToHalf(d);
    for (int j = 0; j < kHalfBlock; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(v[j] * id + 8.5f)));
      const int hi =
          std::min(15, static_cast<int>(static_cast<int8_t>(v[j + kHalfBlock] * id + 8.5f)));
      out[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void QuantizeRowQ4_1(std::span<const float> x, std::span<BlockQ4_1> out) {
  CheckBlocks(x.size(), out.size());
  for (size_t b = 0; b < x.size() / kQuantBlockSize; ++b) {
    const float* v = x.data() + b * kQuantBlockSize;
    float min = v[0];
    float max = v[0];
    for (int j = 1; j < kQuantBlockSize; ++j) {
      min = std::min(min, v[j]);
      max = std::max(max, v[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = FloatToHalf(d);
    out[b].m = FloatToHalf(min);
    for (int j = 0; j < kHalfBlock; ++j) {
      const int lo =
          std::min(15, static_cast<int>(static_cast<int8_t>((v[j] - min) * id + 0.5f)));
      const int hi = std::min(
          15, static_cast<int>(static_cast<int8_t>((v[j + kHalfBlock] - min) * id + 0.5f)));
      out[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace tessera::kernels::cpu
