// Random but valid GGUF tensor bytes for the device decoders' tests (dequantize, embedding):
// random quants and random finite scales, every format of kernels/cuda/gguf_blocks.cuh paired with
// the common/gguf type whose CPU decoder is the reference.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/gguf/ggml_type.h"
#include "kernels/cuda/gguf_blocks.cuh"

namespace tessera::cuda {

struct FormatCase {
  GgufFormat format;
  gguf::GgmlType ggml_type;
  std::vector<int> half_offsets;  // bytes of each block holding an f16 scale (d, m, dmin)
};

inline std::vector<FormatCase> Formats() {
  return {{GgufFormat::kF32, gguf::GgmlType::kF32, {}},
          {GgufFormat::kF16, gguf::GgmlType::kF16, {0}},
          {GgufFormat::kBF16, gguf::GgmlType::kBF16, {}},
          {GgufFormat::kQ8_0, gguf::GgmlType::kQ8_0, {0}},
          {GgufFormat::kQ4_0, gguf::GgmlType::kQ4_0, {0}},
          {GgufFormat::kQ4_1, gguf::GgmlType::kQ4_1, {0, 2}},
          {GgufFormat::kQ4_K, gguf::GgmlType::kQ4_K, {0, 2}},
          {GgufFormat::kQ6_K, gguf::GgmlType::kQ6_K, {208}}};
}

// A random finite f16 bit pattern (subnormals and the largest values included).
inline uint16_t RandomFiniteHalf(std::mt19937& rng) {
  for (;;) {
    const auto bits = static_cast<uint16_t>(rng());
    if ((bits & 0x7C00) != 0x7C00) return bits;
  }
}

// Random bytes, then every scale field (and every F32/BF16 value) replaced by a finite one.
inline std::vector<uint8_t> RandomBlocks(const FormatCase& c, int64_t num_blocks, std::mt19937& rng) {
  const int block_bytes = BlockBytes(c.format);
  std::vector<uint8_t> bytes(num_blocks * block_bytes);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  for (int64_t b = 0; b < num_blocks; ++b) {
    uint8_t* block = bytes.data() + b * block_bytes;
    for (int offset : c.half_offsets) {
      const uint16_t h = RandomFiniteHalf(rng);
      block[offset] = static_cast<uint8_t>(h);
      block[offset + 1] = static_cast<uint8_t>(h >> 8);
    }
    if (c.format == GgufFormat::kF32 && (block[3] & 0x7F) == 0x7F && (block[2] & 0x80)) {
      block[3] &= 0xBF;  // exponent all ones (inf/NaN) -> a finite value
    }
    if (c.format == GgufFormat::kBF16 && (block[1] & 0x7F) == 0x7F && (block[0] & 0x80)) {
      block[1] &= 0xBF;
    }
  }
  return bytes;
}

}  // namespace tessera::cuda
