// RMSNorm: y[m, d] = x[m, d] / sqrt(mean(x²) + eps) * weight[d].
//
// Arithmetic replicates ggml_compute_forward_rms_norm_f32 followed by ggml_mul (what llama.cpp
// runs), to keep our logits close to the llama.cpp oracle: each square x*x is rounded to f32 and
// summed in f64 in index order; mean = (float)(sum / d); scale = 1.0f / sqrtf(mean + eps) in f32;
// y = (x * scale) * weight, both products in f32. Rows are independent (batch invariant).
// Cost is negligible next to the matmuls, so it is single-threaded scalar code.
#pragma once

#include <cstdint>
#include <span>

namespace tessera::kernels::cpu {

// Preconditions: d = weight.size() > 0; m >= 0; x.size() >= m * d; y.size() >= m * d.
// y may be x (in place); otherwise they must not overlap.
void RmsNorm(std::span<const float> x, std::span<const float> weight, float eps, int64_t m,
             std::span<float> y);

}  // namespace tessera::kernels::cpu
