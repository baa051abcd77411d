// Gated RMSNorm of Gated DeltaNet outputs (HF Qwen3NextRMSNormGated, "norm before gate";
// llama.cpp build_norm_gated): per row of d = d_v values (one head of one token)
//   y[r][j] = x[r][j] / sqrt(mean_j(x[r]²) + eps) · weight[j] · silu(z[r][j])
// with silu(z) = z / (1 + exp(-z)). The weight is used as stored (GGUF `ssm_norm`; no 1 + w).
//
// Shapes: x, z, y [rows, d] with rows = tokens · h_v (the rule's output [tokens, h_v, d_v] and
// the gate projection [tokens, h_v · d_v] read as rows of one head); weight [d].
// Arithmetic: RmsNorm's (rms_norm.h: ggml's rms_norm + mul) followed by SwiGlu's silu(z) · y
// (activations.h), so it inherits their contracts: rows independent, kAvx2 == kAvx512 bits.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/isa.h"

namespace tessera::kernels::cpu {

// Preconditions: d = weight.size() > 0; rows >= 0; x, z, y hold at least rows * d floats;
// y may be x (in place) but must not overlap z.
void GatedRmsNorm(std::span<const float> x, std::span<const float> z, std::span<const float> weight,
                  float eps, int64_t rows, std::span<float> y, Isa isa = BestIsa());

}  // namespace tessera::kernels::cpu
