// Decoders for ggml's 4-bit float blocks (layouts in docs/design/fp4-formats.md):
//   MXFP4 {e, qs[16]}     32 elements; x = kE2M1Doubled[code] * E8M0ToFloatHalf(e)
//   NVFP4 {d[4], qs[32]}  64 elements in 4 sub-blocks of 16, each with its UE4M3 scale d[s];
//                         x = kE2M1Doubled[code] * Ue4m3ToFloatHalf(d[s])
// MXFP4 byte j holds element j (low nibble) and j + 16 (high), as Q4_0. NVFP4 sub-block s uses
// bytes qs[8s .. 8s + 7]: byte j holds element 16s + j (low nibble) and 16s + j + 8 (high).
// The int8 table value is converted to float and multiplied by the scale, as ggml does.
#include "common/gguf/block_codec.h"
#include "common/gguf/fp4_codec.h"

namespace tessera::gguf::internal {

void DecodeMxfp4(const uint8_t* block, float* out) {
  const float d = fp4::E8M0ToFloatHalf(block[0]);
  const uint8_t* qs = block + 1;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>(fp4::kE2M1Doubled[qs[j] & 0x0F]) * d;
    out[j + 16] = static_cast<float>(fp4::kE2M1Doubled[qs[j] >> 4]) * d;
  }
}

void DecodeNvfp4(const uint8_t* block, float* out) {
  for (int s = 0; s < 4; ++s) {
    const float d = fp4::Ue4m3ToFloatHalf(block[s]);
    const uint8_t* qs = block + 4 + 8 * s;
    float* y = out + 16 * s;
    for (int j = 0; j < 8; ++j) {
      y[j] = static_cast<float>(fp4::kE2M1Doubled[qs[j] & 0x0F]) * d;
      y[j + 8] = static_cast<float>(fp4::kE2M1Doubled[qs[j] >> 4]) * d;
    }
  }
}

}  // namespace tessera::gguf::internal
