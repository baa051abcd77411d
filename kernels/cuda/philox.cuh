// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC11): a
// counter-based generator, a pure function of a 128-bit counter and a 64-bit key, so any draw can
// be computed on its own, on the host or the device, with the same bits. Known-answer tested
// against Random123's published vectors (tests/unit/cuda/sampling_kernel_test.cc).
//
// How sampling uses it (sampling.cuh): key = the request seed (low word, high word); counter =
// (token position low word, high word, stream, 0) where stream 0 is the token draw. The uniform is
// PhiloxUniform01(output word 0): its top 24 bits scaled by 2^-24, a float in [0, 1) whose every
// value is exactly representable (so host and device agree bit for bit). 24 bits match the f32
// running sums the draw compares u * total with; a token whose probability is below ~2^-24 is
// drawn with a frequency off by up to 2^-24 (the CPU sampler's u has 53 bits).
#pragma once

#include <cstdint>

#include "kernels/cuda/device_compat.cuh"

namespace tessera::cuda {

struct PhiloxCounter {
  uint32_t word[4];
};
struct PhiloxKey {
  uint32_t word[2];
};

inline constexpr uint32_t kPhiloxMultiplier0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxMultiplier1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kPhiloxWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

// One round: two 32x32 -> 64-bit products, their halves xor-ed with the other words and the key.
__host__ __device__ __forceinline__ PhiloxCounter PhiloxRound(PhiloxCounter c, PhiloxKey k) {
  const uint64_t product0 = static_cast<uint64_t>(kPhiloxMultiplier0) * c.word[0];
  const uint64_t product1 = static_cast<uint64_t>(kPhiloxMultiplier1) * c.word[2];
  PhiloxCounter out;
  out.word[0] = static_cast<uint32_t>(product1 >> 32) ^ c.word[1] ^ k.word[0];
  out.word[1] = static_cast<uint32_t>(product1);
  out.word[2] = static_cast<uint32_t>(product0 >> 32) ^ c.word[3] ^ k.word[1];
  out.word[3] = static_cast<uint32_t>(product0);
  return out;
}

// Philox4x32 with 10 rounds; the key is bumped by the Weyl constants between rounds.
__host__ __device__ __forceinline__ PhiloxCounter Philox4x32_10(PhiloxCounter counter,
                                                                PhiloxKey key) {
  counter = PhiloxRound(counter, key);
  for (int round = 1; round < 10; ++round) {
    key.word[0] += kPhiloxWeyl0;
    key.word[1] += kPhiloxWeyl1;
    counter = PhiloxRound(counter, key);
  }
  return counter;
}

// [0, 1) from one output word: the top 24 bits times 2^-24 (exact in f32; never 1).
__host__ __device__ __forceinline__ float PhiloxUniform01(uint32_t word) {
  return static_cast<float>(word >> 8) * 0x1.0p-24f;
}

// The uniform of the token draw of a request with `seed` at token `position` (stream 0).
__host__ __device__ __forceinline__ float SamplingUniform(uint64_t seed, uint64_t position) {
  const PhiloxCounter counter{
      {static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), 0u, 0u}};
  const PhiloxKey key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  return PhiloxUniform01(Philox4x32_10(counter, key).word[0]);
}

}  // namespace tessera::cuda
