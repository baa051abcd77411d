// Gated RMSNorm of Gated DeltaNet outputs (HF Qwen3NextRMSNormGated, norm before gate): the
// device twin of kernels/cpu/gated_rms_norm.h. Per row of d values (one head of one token):
//   y[r][j] = x[r][j] / sqrt(mean_j(x[r]²) + eps) · weight[j] · silu(z[r][j])
// silu(z) = z / (1 + expf(-z)); the weight as stored (no 1 + w). f32 math, one rounding to T.
//
// Shapes: rows = num_tokens · heads. x, y [rows, d] of T contiguous (the rule's output
// [tokens, h_v, d_v]); z: the gate projection, head h of token t at z[t * z_token_stride + h · d]
// (a view into a wider projection output; z_token_stride = heads · d when contiguous);
// weight [d] of T.
// Design: one warp per row, 4 rows per block of 128 threads; each lane takes elements j ≡ lane
// (mod 32), a warp sum gives the mean square; no shared memory, no block barrier.
// Preconditions: d >= 1; z_token_stride >= heads · d; y may be x (in place: each element is read
// before it is written by the same lane) but must not overlap z. T: bf16, f16 or f32.
// Bound (H100): memory; reads x, z and weight (L1/L2 resident) once, writes y once:
// ~3 · sizeof(T) bytes per element (Qwen3-Next, h_v · d_v = 4096 bf16 per token: 24 KiB per token
// per layer, ~7 ns at 3.35 TB/s).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kGatedRmsNormThreads = 128;
inline constexpr int kGatedRmsNormRowsPerBlock = kGatedRmsNormThreads / 32;

template <typename T>
__global__ void __launch_bounds__(kGatedRmsNormThreads)
    GatedRmsNormKernel(const T* x, const T* __restrict__ z, int64_t z_token_stride,
                       const T* __restrict__ weight, T* y, int64_t rows, int heads, int d,
                       float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t row =
      static_cast<int64_t>(blockIdx.x) * kGatedRmsNormRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave together
  const T* x_row = x + row * d;
  const T* z_row = z + (row / heads) * z_token_stride + static_cast<int64_t>(row % heads) * d;
  T* y_row = y + row * d;
  float sum_squares = 0.0f;
  for (int j = lane; j < d; j += 32) {
    const float value = ToFloat(x_row[j]);
    sum_squares = fmaf(value, value, sum_squares);
  }
  const float inv_rms = rsqrtf(WarpSum(sum_squares) / static_cast<float>(d) + eps);
  for (int j = lane; j < d; j += 32) {
    const float normed = ToFloat(x_row[j]) * inv_rms * ToFloat(weight[j]);
    const float gate = ToFloat(z_row[j]);
    y_row[j] = FromFloat<T>(normed * (gate / (1.0f + expf(-gate))));
  }
}

template <class Launcher, typename T>
auto LaunchGatedRmsNorm(Launcher& launcher, const T* x, const T* z, int64_t z_token_stride,
                        const T* weight, T* y, int64_t num_tokens, int heads, int d, float eps) {
  const int64_t rows = num_tokens * heads;
  const int64_t blocks = (rows + kGatedRmsNormRowsPerBlock - 1) / kGatedRmsNormRowsPerBlock;
  const LaunchShape shape{dim3(static_cast<unsigned>(blocks < 1 ? 1 : blocks)),
                          dim3(kGatedRmsNormThreads), 0};
  return launcher.Launch(shape, GatedRmsNormKernel<T>, x, z, z_token_stride, weight, y, rows, heads,
                         d, eps);
}

}  // namespace tessera::cuda
