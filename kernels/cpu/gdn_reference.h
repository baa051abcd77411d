// Straightforward f64 references of the Gated DeltaNet kernels (causal_conv1d.h,
// gated_delta_rule.h, gated_rms_norm.h), written from the formulas of HF transformers'
// modeling_qwen3_next.py, for tests and for the CUDA kernels' comparisons (DESIGN.md §5).
// One sequence per call, contiguous tensors, no threads, no SIMD. State in and out in f32 (as
// the kernels keep it), all arithmetic in f64 in between.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/causal_conv1d.h"
#include "kernels/cpu/gated_delta_rule.h"

namespace tessera::kernels::cpu::reference {

// x, out [num_tokens, C]; weight [C, K]; state [K-1, C] (time-major, as causal_conv1d.h) is
// read and advanced.
void CausalConv1d(const CausalConvParams& params, std::span<const float> weight,
                  std::span<const float> x, int64_t num_tokens, std::span<float> state,
                  std::span<float> out);

// One sequence's tensors for the gated delta rule references, contiguous:
// q, k [T, h_k, d_k]; v [T, h_v, d_v]; g, beta [T, h_v].
struct GdnSequenceData {
  std::span<const float> q, k, v, g, beta;
  int64_t num_tokens = 0;
};

// Token-by-token recurrence (torch_recurrent_gated_delta_rule), including the q/k L2 norm and
// q scale of params. state [h_v, d_k, d_v] is read and advanced; out [T, h_v, d_v].
void GatedDeltaRuleRecurrent(const GatedDeltaRuleParams& params, const GdnSequenceData& data,
                             std::span<float> state, std::span<float> out);

// The chunked WY form (torch_chunk_gated_delta_rule) with chunks of `chunk_size` tokens, the
// last one zero-padded as HF does: an independent check of the algorithm the fast kernel uses
// (equal to GatedDeltaRuleRecurrent up to f64 rounding).
void GatedDeltaRuleChunked(const GatedDeltaRuleParams& params, const GdnSequenceData& data,
                           int chunk_size, std::span<float> state, std::span<float> out);

// beta = sigmoid(b), g = a_coef · softplus(alpha + dt_bias) (exact softplus, no threshold);
// b, alpha, g, beta [rows, h_v] contiguous.
void GdnGates(std::span<const float> b, std::span<const float> alpha, std::span<const float> a_coef,
              std::span<const float> dt_bias, int64_t rows, std::span<float> g,
              std::span<float> beta);

// y[r] = x[r] / sqrt(mean(x[r]²) + eps) · weight · silu(z[r]); x, z, y [rows, d].
void GatedRmsNorm(std::span<const float> x, std::span<const float> z, std::span<const float> weight,
                  float eps, int64_t rows, std::span<float> y);

}  // namespace tessera::kernels::cpu::reference
