// RMSNorm with an optional fused residual add, one block per row.
//   without residual:  out = x / sqrt(mean(x²) + eps) * weight
//   with residual:     residual = T(residual + x);  out = RmsNorm(residual) * weight
// x, out, residual: [num_rows, hidden] of T (bf16, f16 or f32), weight: [hidden] of T; f32
// accumulation. The residual stream is stored rounded to T and the norm is taken of the stored
// value, so the next layer sees exactly what was normalised.
// Bound (H100): memory; reads x (+ residual) and weight, writes out (+ residual) once per row
// after one pass to reduce: 2-3 passes over the row, the second from L1/L2.
#pragma once

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kRmsNormThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kRmsNormThreads)
    RmsNormKernel(const T* __restrict__ x, T* __restrict__ residual, const T* __restrict__ weight,
                  T* __restrict__ out, int hidden, float eps) {
  TESSERA_SHARED(float, scratch, 32);
  const size_t row = blockIdx.x;
  const T* x_row = x + row * hidden;
  T* residual_row = residual ? residual + row * hidden : nullptr;
  T* out_row = out + row * hidden;
  float sum_squares = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float value = ToFloat(x_row[i]);
    if (residual_row) {
      const T stored = FromFloat<T>(value + ToFloat(residual_row[i]));
      residual_row[i] = stored;
      value = ToFloat(stored);
    }
    sum_squares += value * value;
  }
  const float inv_rms = rsqrtf(BlockSum(sum_squares, scratch) / hidden + eps);
  const T* source = residual_row ? residual_row : x_row;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out_row[i] = FromFloat<T>(ToFloat(source[i]) * inv_rms * ToFloat(weight[i]));
  }
}

// residual may be nullptr (plain RMSNorm). out may not alias x or residual.
template <class Launcher, typename T>
auto LaunchRmsNorm(Launcher& launcher, const T* x, T* residual, const T* weight, T* out,
                   int num_rows, int hidden, float eps) {
  const LaunchShape shape{dim3(num_rows), dim3(kRmsNormThreads), 0};
  return launcher.Launch(shape, RmsNormKernel<T>, x, residual, weight, out, hidden, eps);
}

}  // namespace tessera::cuda
