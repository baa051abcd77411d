// Per-block decoders for GGML encodings, shared by dequantize.cc (dispatch) and the K-quant file.
// Each Decode* reads one block at `block` (type_size bytes, any alignment) and writes block_size
// floats to `out`. The float operations follow ggml's dequantize_row_* in the same order, so the
// results are bit-identical to ggml's reference decoders. Internal to common/gguf.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/gguf/dequantize.h"

namespace tessera::gguf::internal {

inline uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline float LoadHalf(const uint8_t* p) { return HalfToFloat(LoadU16(p)); }
inline float LoadF32(const uint8_t* p) {
  const uint32_t bits = LoadU32(p);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Legacy 32-element blocks (dequantize.cc).
void DecodeQ4_0(const uint8_t* block, float* out);
void DecodeQ4_1(const uint8_t* block, float* out);
void DecodeQ5_0(const uint8_t* block, float* out);
void DecodeQ5_1(const uint8_t* block, float* out);
void DecodeQ8_0(const uint8_t* block, float* out);

// 4-bit float blocks: MXFP4 (32 elements), NVFP4 (64 elements) (dequantize_fp4.cc).
void DecodeMxfp4(const uint8_t* block, float* out);
void DecodeNvfp4(const uint8_t* block, float* out);

// K-quant 256-element super-blocks (dequantize_kquants.cc).
void DecodeQ2_K(const uint8_t* block, float* out);
void DecodeQ3_K(const uint8_t* block, float* out);
void DecodeQ4_K(const uint8_t* block, float* out);
void DecodeQ5_K(const uint8_t* block, float* out);
void DecodeQ6_K(const uint8_t* block, float* out);
void DecodeQ8_K(const uint8_t* block, float* out);

}  // namespace tessera::gguf::internal
