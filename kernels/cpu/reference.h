// Straightforward reference implementations of the CPU kernels, for tests (and later for
// comparing CUDA kernels, DESIGN.md §5). Accumulate in f64, favor clarity over speed, and use the
// textbook formulas rather than replicating the kernels' reduction order; compare against them
// with a tolerance. Single-threaded and stateless.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/weight_format.h"

namespace tessera::kernels::cpu::reference {

// y[m, n] = x[m, k] · w[n, k]ᵀ with w dequantized by DequantizeRow.
void Matmul(std::span<const float> x, int64_t m, const WeightView& w, std::span<float> y);

// x rounded as int8_matmul.h step 1 prescribes: each block of 32 scaled so that its largest
// magnitude maps to 127, rounded to the nearest integer (ties to even), scaled back.
std::vector<float> QuantizeActivationsToInt8Grid(std::span<const float> x);

// Int8 matmul reference: Matmul of QuantizeActivationsToInt8Grid(x) (f64 sums).
void Int8Matmul(std::span<const float> x, int64_t m, const WeightView& w, std::span<float> y);

// y[m, d] = x / sqrt(mean(x²) + eps) * weight, in f64.
void RmsNorm(std::span<const float> x, std::span<const float> weight, float eps, int64_t m,
             std::span<float> y);

// Adjacent-pair RoPE on x [num_tokens, num_heads, head_dim] in place, angles
// pos * theta_base^(-2i / rope_dim) in f64.
void Rope(std::span<const int32_t> positions, int num_heads, int head_dim, int rope_dim,
          double theta_base, std::span<float> x);

// out = silu(gate) * up, in f64.
void SwiGlu(std::span<const float> gate, std::span<const float> up, std::span<float> out);

// Row softmax / log-softmax, in f64.
void Softmax(std::span<const float> x, std::span<float> out);
void LogSoftmax(std::span<const float> x, std::span<float> out);

// Causal attention for one sequence with a contiguous KV:
// q, out [num_tokens, num_heads, head_dim] at positions [start_pos, start_pos + num_tokens);
// k, v [context, num_kv_heads, head_dim] for positions 0..context-1, context >=
// start_pos + num_tokens. GQA as in paged_attention.h. f64 math.
void Attention(std::span<const float> q, std::span<const float> k, std::span<const float> v,
               int num_tokens, int start_pos, int num_heads, int num_kv_heads, int head_dim,
               float scale, std::span<float> out);

}  // namespace tessera::kernels::cpu::reference
