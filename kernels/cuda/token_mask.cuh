// The structured-output mask (worker/sampler/slot_grammars.h) on the device: before sampling,
// every token a row's grammar does not allow next gets logit -inf, in place.
//
//   row r with mask_rows[r] = m >= 0:  logits[r, t] = -inf  unless  bit t % 32 of
//                                      masks[m * words + t / 32] is set        (t < vocab)
//   row r with mask_rows[r] < 0:       untouched (unguided rows and padding rows)
//
// words = ceil(vocab / 32). The CPU reference is kernels::cpu::MaskLogits
// (kernels/cpu/token_mask.h); the result is exactly it (a select, no arithmetic), so the cpu and
// cuda backends sample the same masked logits.
// Grid: (kTokenMaskBlocksPerRow, num_rows) blocks of kTokenMaskThreads; block b of a row covers
// a contiguous strip of the vocabulary, one token per thread per iteration (coalesced f32
// stores, each mask word read by 32 neighbouring threads from L1). An unguided row's blocks exit
// at once, so the kernel is always in the step (and in its CUDA graph) at the cost of a few
// empty blocks per row.
// Bound (H100): a guided row moves 4 bytes per token in and out plus vocab / 8 bytes of mask:
// ~1.2 MB for a 152k vocabulary, ~0.4 µs of HBM time; a batch of guided rows runs in parallel
// over the SMs. The kernel is never the step's bottleneck; launch latency dominates.
#pragma once

#include "kernels/cuda/device_compat.cuh"

#include <cmath>
#include <cstdint>

#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kTokenMaskThreads = 256;
inline constexpr int kTokenMaskBlocksPerRow = 8;

// A template (instantiated for f32 logits) so the header defines it once per program.
template <typename T>
__global__ void __launch_bounds__(kTokenMaskThreads)
    TokenMaskKernel(T* __restrict__ logits, int vocab, const uint32_t* __restrict__ masks,
                    const int32_t* __restrict__ mask_rows) {
  const int row = static_cast<int>(blockIdx.y);
  const int32_t mask_row = mask_rows[row];
  if (mask_row < 0) return;
  const int words = (vocab + 31) / 32;
  const uint32_t* mask = masks + static_cast<int64_t>(mask_row) * words;
  T* row_logits = logits + static_cast<int64_t>(row) * vocab;
  const int strip = (vocab + kTokenMaskBlocksPerRow - 1) / kTokenMaskBlocksPerRow;
  const int begin = static_cast<int>(blockIdx.x) * strip;
  const int end = begin + strip < vocab ? begin + strip : vocab;
  for (int t = begin + static_cast<int>(threadIdx.x); t < end; t += kTokenMaskThreads) {
    if (((mask[t / 32] >> (t % 32)) & 1u) == 0u) row_logits[t] = -INFINITY;
  }
}

// Preconditions: num_rows >= 0, vocab >= 1; logits [num_rows, vocab]; mask_rows [num_rows];
// masks holds every row a mask_rows entry names. num_rows == 0 launches nothing.
template <class Launcher>
auto LaunchTokenMask(Launcher& launcher, float* logits, int num_rows, int vocab,
                     const uint32_t* masks, const int32_t* mask_rows) {
  return launcher.Launch(
      LaunchShape{dim3(kTokenMaskBlocksPerRow, unsigned(num_rows > 0 ? num_rows : 0)),
                  dim3(kTokenMaskThreads), 0},
      TokenMaskKernel<float>, logits, vocab, masks, mask_rows);
}

}  // namespace tessera::cuda
