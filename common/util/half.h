// IEEE binary16 and bfloat16 <-> binary32, bit-exact and host-independent (no F16C intrinsics,
// so results do not depend on the build machine's flags). f16/bf16 -> f32 is exact; f32 -> f16
// and f32 -> bf16 round to nearest even (overflow -> inf, NaN stays NaN). Header-only so the CPU
// kernels' scalar paths inline it; GGUF dequantization and the kernels share this one copy.
#pragma once

#include <bit>
#include <cstdint>

namespace tessera::util {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000 | (mantissa << 13);  // inf, or NaN with its payload kept
  } else if (exponent != 0) {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: mantissa * 2^-24. Normalise so the leading 1 becomes the implicit bit.
    uint32_t float_exponent = 127 - 15 + 1;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      --float_exponent;
    }
    bits = sign | (float_exponent << 23) | ((mantissa & 0x3FF) << 13);
  }
  return std::bit_cast<float>(bits);
}

namespace half_detail {

// Shifts `value` right by `shift` bits, rounding to nearest, ties to even.
inline uint32_t ShiftRightRoundEven(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t remainder = value & ((uint32_t{1} << shift) - 1);
  const uint32_t halfway = uint32_t{1} << (shift - 1);
  if (remainder > halfway || (remainder == halfway && (kept & 1) != 0)) return kept + 1;
  return kept;
}

}  // namespace half_detail

inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t magnitude = bits & 0x7FFFFFFF;
  if (magnitude > 0x7F800000) {
    // NaN: keep the top payload bits and force the quiet bit so the payload cannot become 0 (inf).
    return static_cast<uint16_t>(sign | 0x7E00 | ((magnitude >> 13) & 0x3FF));
  }
  // 65520 is halfway between the largest half (65504) and 65536; ties-to-even rounds it up to inf.
  if (magnitude >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);
  if (magnitude >= 0x38800000) {                              // >= 2^-14: a normal half
    const uint32_t rebased = magnitude - ((127 - 15) << 23);  // exponent and mantissa, rebiased
    // A mantissa carry correctly bumps the exponent (and the bound above keeps it below inf).
    return static_cast<uint16_t>(sign | half_detail::ShiftRightRoundEven(rebased, 13));
  }
  // Subnormal or zero half: count units of 2^-24. value = mantissa24 * 2^(exponent - 150), so the
  // count is mantissa24 >> (126 - exponent). Float subnormals (exponent 0) are far below 2^-25.
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return sign;  // < 2^-25 (ties at exactly 2^-25 round to even = 0 as well)
  const uint32_t mantissa24 = (magnitude & 0x7FFFFF) | 0x800000;
  return static_cast<uint16_t>(sign | half_detail::ShiftRightRoundEven(mantissa24, 126 - exponent));
}

inline float Bf16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7FFFFFFF) > 0x7F800000) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN (quiet bit set)
  }
  // Round to nearest even on the dropped 16 bits; overflow rounds up to inf as it should.
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

}  // namespace tessera::util
