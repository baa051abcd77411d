// Numerically stable softmax / log-softmax over one row, and the exp-and-sum primitive that
// attention uses.
//
// Sums use a fixed order that depends only on the row length: 16 lane accumulators (lane l sums
// elements l, l + 16, l + 32, ...) reduced by the tree in simd_scalar.h. exp is a polynomial
// approximation (about 2 ulp; simd_scalar.h), identical on kAvx2 and kAvx512.
// All functions are stateless and thread-safe.
#pragma once

#include <span>

#include "kernels/cpu/isa.h"

namespace tessera::kernels::cpu {

// max over x. Precondition: !x.empty().
float RowMax(std::span<const float> x, Isa isa = BestIsa());

// x[i] <- x[i] * scale.
void ScaleInPlace(std::span<float> x, float scale, Isa isa = BestIsa());

// x[i] <- exp(x[i] - shift); returns Σ x[i] (after the update), in the fixed order above.
float ExpShiftInPlace(std::span<float> x, float shift, Isa isa = BestIsa());

// log Σ exp(x[i]), stable. Returns -inf when every element is -inf. Precondition: !x.empty().
float LogSumExp(std::span<const float> x, Isa isa = BestIsa());

// x <- softmax(x). Precondition: !x.empty() and max(x) is finite.
void SoftmaxInPlace(std::span<float> x, Isa isa = BestIsa());

// x <- log_softmax(x) = x - LogSumExp(x). Precondition: !x.empty() and max(x) is finite.
void LogSoftmaxInPlace(std::span<float> x, Isa isa = BestIsa());

}  // namespace tessera::kernels::cpu
