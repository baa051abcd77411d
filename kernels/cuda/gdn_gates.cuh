// The gated delta rule's per-token gates from the layer's `ba` projection: the device twin of
// kernels/cpu/gated_delta_rule.h's GdnGates (HF Qwen3NextGatedDeltaNet.forward), per row r and
// value head h:
//   beta[r][h] = sigmoid(b[r][h]) = 1 / (1 + expf(-b))
//   g[r][h]    = a_coef[h] · softplus(alpha[r][h] + dt_bias[h]),
//                softplus(x) = log1pf(expf(x)), = x above 20 (PyTorch's and ggml's threshold)
// a_coef = −exp(A_log) (GGUF `ssm_a`), dt_bias = `ssm_dt.bias`.
//
// Shapes: b, alpha [rows, h_v] of T, row r at b[r * b_stride] / alpha[r * alpha_stride] (views
// into the projection output); a_coef, dt_bias [h_v] f32 (the loader keeps these small per-layer
// vectors in f32 whatever the activation type); g, beta [rows, h_v] f32 contiguous (the rule
// reads them in f32). Elementwise, f32 math: batch invariant.
// Preconditions: h_v >= 1; strides >= h_v; g and beta overlap no input. T: bf16, f16 or f32.
// Bound (H100): memory, 2·sizeof(T) + 8 bytes per (row, head); negligible next to the rule.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kGdnGatesThreads = 256;
inline constexpr float kSoftplusThreshold = 20.0f;

template <typename T>
__global__ void __launch_bounds__(kGdnGatesThreads)
    GdnGatesKernel(const T* __restrict__ b, int64_t b_stride, const T* __restrict__ alpha,
                   int64_t alpha_stride, const float* __restrict__ a_coef,
                   const float* __restrict__ dt_bias, int64_t rows, int heads,
                   float* __restrict__ g, float* __restrict__ beta) {
  const int64_t total = rows * heads;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t r = i / heads;
    const int h = static_cast<int>(i % heads);
    const float x = ToFloat(alpha[r * alpha_stride + h]) + dt_bias[h];
    const float softplus = x > kSoftplusThreshold ? x : log1pf(expf(x));
    g[i] = a_coef[h] * softplus;
    beta[i] = 1.0f / (1.0f + expf(-ToFloat(b[r * b_stride + h])));
  }
}

// Grid-stride over rows · h_v elements, at most 1024 blocks.
template <class Launcher, typename T>
auto LaunchGdnGates(Launcher& launcher, const T* b, int64_t b_stride, const T* alpha,
                    int64_t alpha_stride, const float* a_coef, const float* dt_bias, int64_t rows,
                    int heads, float* g, float* beta) {
  const int64_t total = rows * heads;
  const int64_t blocks = (total + kGdnGatesThreads - 1) / kGdnGatesThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks));
  const LaunchShape shape{dim3(grid), dim3(kGdnGatesThreads), 0};
  return launcher.Launch(shape, GdnGatesKernel<T>, b, b_stride, alpha, alpha_stride, a_coef,
                         dt_bias, rows, heads, g, beta);
}

}  // namespace tessera::cuda
