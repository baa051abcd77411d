// An IEEE binary16 value as stored in f16 KV pools (kv_cache.h). A distinct type rather than a
// bare uint16_t, so the SIMD headers' Load overloads convert it and nothing else.
#pragma once

#include <cstdint>

#include "common/util/half.h"

namespace tessera::kernels::cpu {

struct Float16 {
  uint16_t bits = 0;
};
static_assert(sizeof(Float16) == 2);

// Round to nearest even (util::FloatToHalf); converting back is exact.
inline Float16 ToFloat16(float f) { return Float16{util::FloatToHalf(f)}; }
inline float ToFloat(Float16 h) { return util::HalfToFloat(h.bits); }

}  // namespace tessera::kernels::cpu
