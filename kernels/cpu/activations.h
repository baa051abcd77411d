// SwiGLU feed-forward activation: out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)).
// exp is the polynomial of simd_scalar.h (about 2 ulp). Elementwise, so batch invariant.
// Stateless and thread-safe.
#pragma once

#include <span>

#include "kernels/cpu/isa.h"

namespace tessera::kernels::cpu {

// Preconditions: gate, up and out have the same size; out may alias gate or up exactly.
void SwiGlu(std::span<const float> gate, std::span<const float> up, std::span<float> out,
            Isa isa = BestIsa());

}  // namespace tessera::kernels::cpu
