// RMSNorm with an optional fused residual add, one block per row.
//   without residual:  out = x / sqrt(mean(x²) + eps) * weight
//   with residual:     residual = T(residual + x);  out = RmsNorm(residual) * weight
// x, out, residual: [num_rows, hidden] of T (bf16, f16 or f32), weight: [hidden] of T; f32
// accumulation. The residual stream is stored rounded to T and the norm is taken of the stored
// value, so the next layer sees exactly what was normalised.
// Bound (H100): memory; reads x (+ residual) and weight, writes out (+ residual) once per row
// after one pass to reduce: 2-3 passes over the row, the second from L1/L2. One block per row:
// at decode sizes (a few rows of 8 KiB) it is latency-bound, so rows whose width is a multiple of
// 16 bytes (every model's) move in 16-byte loads and stores, two per thread at hidden 4096 bf16
// (one 2-byte load per thread per iteration took 14 µs per row on an H200, 16 iterations deep).
#pragma once

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/ptx_ops.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace tessera::cuda {

inline constexpr int kRmsNormThreads = 256;

namespace rms_norm_detail {

// Pass 1: Σ value² over the row (value = x, or the stored residual + x, written back), this
// thread's share. 16-byte loads when `vectorized` (every row and pointer 16-byte aligned).
template <typename T>
__device__ __forceinline__ float SumSquares(const T* x_row, T* residual_row, int hidden,
                                            bool vectorized) {
  float sum_squares = 0.0f;
  if (vectorized) {
    constexpr int kVec = kVec16<T>;
    for (int i = threadIdx.x * kVec; i < hidden; i += blockDim.x * kVec) {
      float v[kVec];
      Load16(x_row + i, v);
      if (residual_row) {
        float r[kVec];
        Load16(residual_row + i, r);
        for (int k = 0; k < kVec; ++k) v[k] = ToFloat(FromFloat<T>(v[k] + r[k]));
        Store16(residual_row + i, v);  // exact: v holds T values
      }
      for (int k = 0; k < kVec; ++k) sum_squares += v[k] * v[k];
    }
    return sum_squares;
  }
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float value = ToFloat(x_row[i]);
    if (residual_row) {
      const T stored = FromFloat<T>(value + ToFloat(residual_row[i]));
      residual_row[i] = stored;
      value = ToFloat(stored);
    }
    sum_squares += value * value;
  }
  return sum_squares;
}

// Pass 2: out = source * inv_rms * weight.
template <typename T>
__device__ __forceinline__ void Scale(const T* source, const T* weight, float inv_rms, T* out_row,
                                      int hidden, bool vectorized) {
  if (vectorized) {
    constexpr int kVec = kVec16<T>;
    for (int i = threadIdx.x * kVec; i < hidden; i += blockDim.x * kVec) {
      float v[kVec], w[kVec];
      Load16(source + i, v);
      Load16(weight + i, w);
      for (int k = 0; k < kVec; ++k) v[k] = v[k] * inv_rms * w[k];
      Store16(out_row + i, v);
    }
    return;
  }
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out_row[i] = FromFloat<T>(ToFloat(source[i]) * inv_rms * ToFloat(weight[i]));
  }
}

}  // namespace rms_norm_detail

template <typename T>
__global__ void __launch_bounds__(kRmsNormThreads)
    RmsNormKernel(const T* __restrict__ x, T* __restrict__ residual, const T* __restrict__ weight,
                  T* __restrict__ out, int hidden, float eps) {
  ptx::GridDependencyWait();  // a dependent launch (LaunchShape::dependent)
  ptx::LaunchDependents();
  TESSERA_SHARED(float, scratch, 32);
  const size_t row = blockIdx.x;
  const T* x_row = x + row * hidden;
  T* residual_row = residual ? residual + row * hidden : nullptr;
  T* out_row = out + row * hidden;
  const bool vectorized = hidden % kVec16<T> == 0 && Aligned16(x) && Aligned16(weight) &&
                          Aligned16(out) && (residual == nullptr || Aligned16(residual));
  const float sum_squares = rms_norm_detail::SumSquares(x_row, residual_row, hidden, vectorized);
  const float inv_rms = rsqrtf(BlockSum(sum_squares, scratch) / hidden + eps);
  rms_norm_detail::Scale(residual_row ? residual_row : x_row, weight, inv_rms, out_row, hidden,
                         vectorized);
}

// residual may be nullptr (plain RMSNorm). out may not alias x or residual.
template <class Launcher, typename T>
auto LaunchRmsNorm(Launcher& launcher, const T* x, T* residual, const T* weight, T* out,
                   int num_rows, int hidden, float eps) {
  const LaunchShape shape{dim3(num_rows), dim3(kRmsNormThreads), 0, /*dependent=*/true};
  return launcher.Launch(shape, RmsNormKernel<T>, x, residual, weight, out, hidden, eps);
}

}  // namespace tessera::cuda
