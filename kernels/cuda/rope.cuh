// Rotary position embedding of one token's q [num_heads, head_dim] and k [num_kv_heads, head_dim]
// (bf16, f16 or f32; f32 math), at the token's position: the device half of rope_kv_write.cuh,
// which launches it a thread per pair.
// Pairs as the CPU engine (kernels/cpu/rope.h): normal/GGUF-llama mode rotates (2i, 2i + 1),
// NeoX mode (i, i + rope_dim / 2), for i < rope_dim / 2; dimensions >= rope_dim are untouched.
//
// The angles come in precomputed: cos_sin [max_positions, rope_dim / 2, 2] f32 is exactly the CPU
// engine's RopeTable (copy max_positions * rope_dim floats from RopeTable::CosSin(0)), so every
// scaling the engine supports — linear (freq_scale), Llama 3 per-pair frequency factors, YaRN
// with its magnitude correction, attn_factor — needs no logic here, and the rotation
//   x'0 = x0 * cos - x1 * sin,   x'1 = x0 * sin + x1 * cos
// is the CPU's, in the same order, with products through __fmul_rn (no fma contraction on the
// GPU): the result is bit-identical to kernels::cpu::ApplyRope on the same values, then rounded
// once to T. (A table rather than inverse frequencies: ggml, and hence the CPU engine, builds
// each angle by repeated f32 multiplication, which pos * inv_freq[i] would not reproduce; the
// table costs max_positions * rope_dim * 4 bytes, 4 MiB for 8192 positions x 128 dims.)
//
// A position outside [0, max_positions) leaves that token's q and k unchanged (the table is
// never read out of bounds); the worker keeps positions below the model's context.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"

namespace tessera::cuda {

// RoPE pairing; the same meaning as kernels::cpu::RopeMode.
enum class RopeStyle : int { kNormal, kNeox };

// The elements (a, b) of pair i of a head.
template <RopeStyle kStyle>
__device__ __forceinline__ int2 RopePairElements(int i, int half_rope) {
  return kStyle == RopeStyle::kNormal ? int2{2 * i, 2 * i + 1} : int2{i, i + half_rope};
}

// Pair (x0, x1) rotated by the angle of table entries (c, s) = cos_sin[2i], cos_sin[2i + 1],
// each result rounded once to T.
template <typename T>
__device__ __forceinline__ void RotateValues(T& x0, T& x1, const float* cos_sin, int i) {
  const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
  const float f0 = ToFloat(x0), f1 = ToFloat(x1);
  x0 = FromFloat<T>(__fmul_rn(f0, c) - __fmul_rn(f1, s));
  x1 = FromFloat<T>(__fmul_rn(f0, s) + __fmul_rn(f1, c));
}

}  // namespace tessera::cuda
