// SwiGLU: out = silu(gate) * up, silu(x) = x / (1 + exp(-x)), f32 math, bf16 / f16 / f32 storage.
// Two layouts, as the MLP produces them:
//   fused:    gate_up [num_tokens, 2 * width], gate the first half of each row, up the second
//             (vLLM's merged gate_up projection); out [num_tokens, width]
//   separate: gate, up, out [num_tokens, width]
// exp is __expf (the GPU's fast exponential, ~2 ulp; libm under the emulator), so results agree
// with an exact SwiGLU to a few f32 ulp before the one rounding to T.
//
// Design: grid (num_tokens, chunks of a row); each thread handles 16 bytes of the row (8 bf16/f16
// or 4 f32) with one 128-bit load of gate, one of up and one 128-bit store, when every base
// pointer and row stride is 16-byte aligned and width is a multiple of 16 / sizeof(T) (checked
// at launch; cudaMalloc'd buffers and model widths such as 1536, 8192 or 14336 always are).
// Otherwise the scalar fallback: one element per thread, still coalesced (consecutive threads,
// consecutive elements). Bound (H100): memory; 3 * width * sizeof(T) bytes per token, e.g.
// 512 tokens x 14336 x 2 B x 3 = 44 MB ~ 13 µs at 3.35 TB/s.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/ptx_ops.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace tessera::cuda {

inline constexpr int kSwiGluThreads = 256;

__device__ __forceinline__ float SwiGluValue(float gate, float up) {
  return gate / (1.0f + __expf(-gate)) * up;
}

// Row r of gate/up/out starts at r * (its stride) elements. kVector: 16-byte accesses (see top).
template <typename T, bool kVector>
__global__ void __launch_bounds__(kSwiGluThreads)
    SwiGluKernel(const T* gate, const T* up, T* out, int64_t gate_stride, int64_t up_stride,
                 int64_t out_stride, int width) {
  ptx::GridDependencyWait();  // a dependent launch (LaunchShape::dependent)
  ptx::LaunchDependents();
  constexpr int kPerThread = kVector ? kVec16<T> : 1;
  const int64_t token = blockIdx.x;
  const int first = (static_cast<int>(blockIdx.y) * blockDim.x + threadIdx.x) * kPerThread;
  if (first >= width) return;
  const T* g = gate + token * gate_stride + first;
  const T* u = up + token * up_stride + first;
  T* o = out + token * out_stride + first;
  if constexpr (kVector) {
    float gv[kPerThread], uv[kPerThread];
    Load16(g, gv);
    Load16(u, uv);
    for (int k = 0; k < kPerThread; ++k) gv[k] = SwiGluValue(gv[k], uv[k]);
    Store16(o, gv);
  } else {
    *o = FromFloat<T>(SwiGluValue(ToFloat(*g), ToFloat(*u)));
  }
}

// Whether the 16-byte path applies (host-side check of the device addresses and strides).
template <typename T>
bool SwiGluVectorizable(const T* gate, const T* up, const T* out, int64_t gate_stride,
                        int64_t up_stride, int64_t out_stride, int width) {
  const auto misaligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) != 0; };
  constexpr int64_t kVec = kVec16<T>;
  return !misaligned(gate) && !misaligned(up) && !misaligned(out) && width % kVec == 0 &&
         gate_stride % kVec == 0 && up_stride % kVec == 0 && out_stride % kVec == 0;
}

// The general strided form. Preconditions: num_tokens > 0 (< 2^31), width > 0; strides >= width;
// out does not overlap gate or up except exactly (out == gate or out == up with equal strides:
// each thread reads its elements before writing them).
template <class Launcher, typename T>
auto LaunchSwiGluStrided(Launcher& launcher, const T* gate, const T* up, T* out,
                         int64_t gate_stride, int64_t up_stride, int64_t out_stride,
                         int num_tokens, int width) {
  const bool vector =
      SwiGluVectorizable(gate, up, out, gate_stride, up_stride, out_stride, width);
  const unsigned per_thread = vector ? kVec16<T> : 1;
  const unsigned chunks = CeilDiv(CeilDiv(static_cast<unsigned>(width), per_thread), kSwiGluThreads);
  const LaunchShape shape{dim3(num_tokens, chunks), dim3(kSwiGluThreads), 0, /*dependent=*/true};
  if (vector) {
    return launcher.Launch(shape, SwiGluKernel<T, true>, gate, up, out, gate_stride, up_stride,
                           out_stride, width);
  }
  return launcher.Launch(shape, SwiGluKernel<T, false>, gate, up, out, gate_stride, up_stride,
                         out_stride, width);
}

// Fused: gate_up [num_tokens, 2 * width] -> out [num_tokens, width]. out must not overlap gate_up.
template <class Launcher, typename T>
auto LaunchSwiGluFused(Launcher& launcher, const T* gate_up, T* out, int num_tokens, int width) {
  return LaunchSwiGluStrided(launcher, gate_up, gate_up + width, out, int64_t{2} * width,
                             int64_t{2} * width, int64_t{width}, num_tokens, width);
}

// Separate: gate, up, out [num_tokens, width]; out may alias gate or up exactly.
template <class Launcher, typename T>
auto LaunchSwiGlu(Launcher& launcher, const T* gate, const T* up, T* out, int num_tokens,
                  int width) {
  return LaunchSwiGluStrided(launcher, gate, up, out, int64_t{width}, int64_t{width},
                             int64_t{width}, num_tokens, width);
}

}  // namespace tessera::cuda
