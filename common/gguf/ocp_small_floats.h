// The OCP small float formats as NVIDIA's checkpoints and the CUDA packed layout define them:
// E2M1 (FP4 values), E4M3 "fn" (sign, 4 exponent bits bias 7, 3 mantissa bits, subnormals, no
// infinities; S.1111.111 is NaN) and E8M0 (2^(e - 127); 255 is NaN). ggml's GGUF blocks decode
// their scale bytes differently at the edges (fp4_codec.h: UE4M3 ignores the sign bit and maps
// 0x7F to 0; its E8M0 has no NaN), so a GGUF block's bytes are read with fp4_codec.h, a ModelOpt
// tensor's or a planar packed weight's with these. Every value is exact in f32. Header-only,
// pure functions; thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace tessera::gguf::ocp {

// The low 4 bits: sign bit 3, magnitude ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
inline float E2M1ToFloat(uint8_t code) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float magnitude = kMagnitude[code & 7];
  return (code & 8) ? -magnitude : magnitude;
}

inline float E4M3ToFloat(uint8_t bits) {
  const int exponent = (bits >> 3) & 15, mantissa = bits & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa), -9)
                              : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return (bits & 0x80) ? -magnitude : magnitude;
}

inline float E8M0ToFloat(uint8_t bits) {
  if (bits == 255) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, bits - 127);
}

}  // namespace tessera::gguf::ocp
