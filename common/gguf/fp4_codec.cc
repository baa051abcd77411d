// Rounding to the 4-bit float formats' scale (E4M3) and element (E2M1) encodings, for the
// quantizers. Round to nearest, ties to even, as the NVFP4 recipe (and the hardware's cvt) do.
#include "common/gguf/fp4_codec.h"

#include <cmath>

namespace tessera::gguf::fp4 {

uint8_t FloatToE4M3(float x) {
  if (!(x > 0.0f)) return 0;     // zero, negative, NaN
  if (x >= 448.0f) return 0x7E;  // saturate: 448 is the largest finite E4M3 value
  constexpr float kMinNormal = 0.015625f;  // 2^-6
  if (x < kMinNormal) {
    // Subnormal: mantissa * 2^-9. Scaling by 2^9 is exact; 8 rounds up into the smallest normal,
    // whose code (exponent 1, mantissa 0) is 8 too.
    return static_cast<uint8_t>(std::nearbyint(x * 512.0f));
  }
  const int exponent = std::ilogb(x);  // -6 .. 8
  const float mantissa = std::ldexp(x, -exponent) - 1.0f;  // [0, 1), exact
  const int steps = static_cast<int>(std::nearbyint(mantissa * 8.0f));  // 0 .. 8, exact input
  const int code = ((exponent + 7) << 3) + steps;  // steps == 8 carries into the exponent
  return static_cast<uint8_t>(code > 0x7E ? 0x7E : code);
}

uint8_t FloatToE2M1(float v) {
  // Midpoints between consecutive magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; at a midpoint the even
  // code (the one with mantissa bit 0 clear) wins.
  constexpr float kMidpoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float a = std::fabs(v);
  uint8_t code = 0;
  for (int i = 0; i < 7; ++i) {
    const int upper = i + 1;
    if (a > kMidpoints[i] || (a == kMidpoints[i] && upper % 2 == 0)) code = static_cast<uint8_t>(upper);
  }
  return code != 0 && v < 0.0f ? static_cast<uint8_t>(code | 0x8) : code;
}

}  // namespace tessera::gguf::fp4
