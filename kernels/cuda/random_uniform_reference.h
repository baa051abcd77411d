// CPU reference of the random fill (random_uniform.cuh), written from its definition the plain
// way: one Philox4x32-10 call per element (philox.cuh, known-answer tested), the unit value in
// f64, then the same single f32 fma. For tests (header-only: the kernel tests are its users).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/philox.cuh"
#include "kernels/cuda/random_uniform.cuh"

namespace tessera::cuda::reference {

// The f32 values (before rounding to the tensor's type) of elements [0, count).
inline std::vector<float> RandomUniform(const RandomUniformParams& p, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  const PhiloxKey key{{static_cast<uint32_t>(p.seed & 0xFFFFFFFFu),
                       static_cast<uint32_t>(p.seed >> 32)}};
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t group = static_cast<uint64_t>(i) / 4;
    const PhiloxCounter counter{{static_cast<uint32_t>(group & 0xFFFFFFFFu),
                                 static_cast<uint32_t>(group >> 32), p.stream,
                                 kRandomUniformTag}};
    const uint32_t word = Philox4x32_10(counter, key).word[i % 4];
    const double top24 = static_cast<double>(word >> 8);
    const double unit = (2.0 * top24 + 1.0 - 16777216.0) / 16777216.0;  // exact in f32
    out[static_cast<size_t>(i)] = std::fma(p.scale, static_cast<float>(unit), p.center);
  }
  return out;
}

}  // namespace tessera::cuda::reference
