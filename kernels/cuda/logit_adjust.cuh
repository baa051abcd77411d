// The per-row logits adjustments a request asks for, applied on the device right before
// sampling, in place: OpenAI's logit_bias, then the structured-output mask
// (worker/sampler/slot_grammars.h).
//
//   row r, for k in [bias_offsets[r], bias_offsets[r + 1]):
//       logits[r, bias_tokens[k]] += bias_values[k]          (one f32 add; ids distinct per row)
//   then, when mask_rows[r] = m >= 0:
//       logits[r, t] = -inf  unless bit t % 32 of masks[m * words + t / 32] is set   (t < vocab)
//   rows with no bias entries and mask_rows[r] < 0 (unguided rows, padding) are untouched.
//
// words = ceil(vocab / 32). The CPU reference is kernels::cpu::AddLogitBias then
// kernels::cpu::MaskLogits (kernels/cpu/logit_adjust.h); the result is exactly theirs (an add
// and a select), so the cpu and cuda backends sample the same adjusted logits.
// Grid: (kLogitAdjustBlocksPerRow, num_rows) blocks of kLogitAdjustThreads; block b of a row
// owns a contiguous strip of the vocabulary: it adds the row's biases that fall in its strip,
// then (after a barrier) masks the strip, one token per thread per iteration (coalesced f32
// stores, each mask word read by 32 neighbouring threads). A row with nothing to do exits at
// once, so the kernel is always in the step (and in its CUDA graph) at the cost of a few empty
// blocks per row.
// Bound (H100): a guided row moves 4 bytes per token in and out plus vocab / 8 bytes of mask:
// ~1.2 MB for a 152k vocabulary, ~0.4 µs of HBM time; rows run in parallel over the SMs; a
// row's bias entries (at most 1024) are read once per strip. Never the step's bottleneck: launch
// latency dominates.
#pragma once

#include "kernels/cuda/device_compat.cuh"

#include <cmath>
#include <cstdint>

#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kLogitAdjustThreads = 256;
inline constexpr int kLogitAdjustBlocksPerRow = 8;

// Each row's logit_bias entries (CSR) and structured-output mask.
//   bias_offsets [num_rows + 1] (non-decreasing, [0] == 0); bias_tokens / bias_values [nnz],
//   each row's tokens distinct and in [0, vocab);
//   masks [*, words]; mask_rows [num_rows]: a row of masks, or -1.
struct LogitAdjustments {
  const int32_t* bias_offsets = nullptr;
  const int32_t* bias_tokens = nullptr;
  const float* bias_values = nullptr;
  const uint32_t* masks = nullptr;
  const int32_t* mask_rows = nullptr;
};

// A template (instantiated for f32 logits) so the header defines it once per program.
template <typename T>
__global__ void __launch_bounds__(kLogitAdjustThreads)
    LogitAdjustKernel(T* __restrict__ logits, int vocab, LogitAdjustments adjust) {
  const int row = static_cast<int>(blockIdx.y);
  const int32_t bias_begin = adjust.bias_offsets[row];
  const int32_t bias_end = adjust.bias_offsets[row + 1];
  const int32_t mask_row = adjust.mask_rows[row];
  if (bias_begin == bias_end && mask_row < 0) return;  // uniform over the block
  T* row_logits = logits + static_cast<int64_t>(row) * vocab;
  const int strip = (vocab + kLogitAdjustBlocksPerRow - 1) / kLogitAdjustBlocksPerRow;
  const int begin = static_cast<int>(blockIdx.x) * strip;
  const int end = begin + strip < vocab ? begin + strip : vocab;
  for (int32_t k = bias_begin + static_cast<int32_t>(threadIdx.x); k < bias_end;
       k += kLogitAdjustThreads) {
    const int32_t token = adjust.bias_tokens[k];
    if (token >= begin && token < end) row_logits[token] += adjust.bias_values[k];
  }
  if (mask_row < 0) return;  // uniform: no barrier is skipped by part of the block
  __syncthreads();
  const int words = (vocab + 31) / 32;
  const uint32_t* mask = adjust.masks + static_cast<int64_t>(mask_row) * words;
  for (int t = begin + static_cast<int>(threadIdx.x); t < end; t += kLogitAdjustThreads) {
    if (((mask[t / 32] >> (t % 32)) & 1u) == 0u) row_logits[t] = -INFINITY;
  }
}

// Preconditions: num_rows >= 1, vocab >= 1; logits [num_rows, vocab]; `adjust` as documented.
template <class Launcher>
auto LaunchLogitAdjust(Launcher& launcher, float* logits, int num_rows, int vocab,
                       const LogitAdjustments& adjust) {
  return launcher.Launch(LaunchShape{dim3(kLogitAdjustBlocksPerRow, unsigned(num_rows)),
                                     dim3(kLogitAdjustThreads), 0},
                         LogitAdjustKernel<float>, logits, vocab, adjust);
}

}  // namespace tessera::cuda
