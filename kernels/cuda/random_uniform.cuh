// Deterministic pseudo-random fill (T = bf16, f16 or f32) for synthetic weights (`--load-format
// dummy`): element i of a tensor is a pure function of (seed, stream, i), so a tensor comes out
// the same on the GPU, on the emulator and in the CPU reference (random_uniform_reference.h),
// whatever the grid, and two tensors with different streams are independent.
//
//   out[i] = RoundTo<T>(fma(scale, u_i, center))   i < count
//
// u_i: Philox4x32-10 (philox.cuh) with key = seed and counter = (i / 4 low word, i / 4 high
// word, stream, kRandomUniformTag) gives four words; word i % 4, top 24 bits k, maps to
// (2k + 1 - 2^24) / 2^24: 2^24 equally likely values, symmetric about 0, in (-1, 1), each exact
// in f32 (so the fma's one rounding is the only one before T's). scale 0 gives a constant.
// Preconditions: count >= 0; out holds count elements.
// Grid: one thread per 4 elements (one Philox call), ceil(groups / kRandomUniformThreads) blocks
// up to kRandomUniformMaxBlocks, striding over the rest.
// Bound (H100): store bandwidth, bytes written ÷ 3.35 TB/s (Llama-3.1-8B's 16 GB of bf16 in
// ~5 ms); the 10 Philox rounds (20 integer multiplies per 4 elements) stay below that on 132
// SMs. Runs once at load, never on the step path.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/philox.cuh"

namespace tessera::cuda {

inline constexpr int kRandomUniformThreads = 256;
inline constexpr int kRandomUniformMaxBlocks = 4 * 132;  // 4 per H100 SM; the loop strides on
// The counter's last word: keeps these draws apart from the sampler's (sampling.cuh uses 0).
inline constexpr uint32_t kRandomUniformTag = 0x57E1647u;

struct RandomUniformParams {
  uint64_t seed = 0;
  uint32_t stream = 0;  // one per tensor
  float center = 0.0f;
  float scale = 1.0f;
};

// The Philox block of 4 consecutive elements starting at 4 * group.
__host__ __device__ __forceinline__ PhiloxCounter RandomUniformBlock(
    const RandomUniformParams& p, uint64_t group) {
  const PhiloxCounter counter{{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
                               p.stream, kRandomUniformTag}};
  const PhiloxKey key{{static_cast<uint32_t>(p.seed), static_cast<uint32_t>(p.seed >> 32)}};
  return Philox4x32_10(counter, key);
}

// One output word -> (-1, 1): odd multiples of 2^-24.
__host__ __device__ __forceinline__ float SymmetricUnit(uint32_t word) {
  const int32_t k = static_cast<int32_t>(word >> 8);
  return static_cast<float>(2 * k + 1 - (1 << 24)) * 0x1.0p-24f;
}

template <typename T>
__global__ void __launch_bounds__(kRandomUniformThreads)
    RandomUniformKernel(T* __restrict__ out, int64_t count, RandomUniformParams params) {
  const int64_t groups = (count + 3) / 4;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t g = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups; g += stride) {
    const PhiloxCounter words = RandomUniformBlock(params, static_cast<uint64_t>(g));
    TESSERA_UNROLL
    for (int k = 0; k < 4; ++k) {
      const int64_t i = 4 * g + k;
      if (i < count) {
        out[i] = FromFloat<T>(__fmaf_rn(params.scale, SymmetricUnit(words.word[k]),
                                        params.center));
      }
    }
  }
}

template <class Launcher, typename T>
auto LaunchRandomUniform(Launcher& launcher, T* out, int64_t count,
                         const RandomUniformParams& params) {
  int64_t blocks = ((count + 3) / 4 + kRandomUniformThreads - 1) / kRandomUniformThreads;
  blocks = blocks < 1 ? 1 : (blocks > kRandomUniformMaxBlocks ? kRandomUniformMaxBlocks : blocks);
  return launcher.Launch(LaunchShape{dim3(unsigned(blocks)), dim3(kRandomUniformThreads), 0},
                         RandomUniformKernel<T>, out, count, params);
}

}  // namespace tessera::cuda
