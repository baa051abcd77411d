// Causal depthwise conv1d + SiLU with a rolling state: the short convolution in front of the
// Gated DeltaNet rule (Qwen3-Next / Qwen3.5). The device twin of kernels/cpu/causal_conv1d.h,
// whose header states the math; here, per sequence and channel c, with in(j) the input row j of
// this launch (j < 0: the conv state):
//   y[t][c]   = Σ_{k=0}^{K-1} w[c][k] · in(t - (K-1) + k)[c]    fmaf chain in order k = 0..K-1
//   out[t][c] = silu(y) = y / (1 + expf(-y))  (when apply_silu, the models), else y
// and the state slot afterwards holds the last K-1 rows of [old state; x].
//
// Shapes: x [rows, C] of T, row r at x[r * x_stride] (a view into the projection output);
// out [rows, C] of T at out[r * out_stride]; weight [C, K] of T; states [num_slots, K-1, C] f32,
// TIME-major as the CPU kernel keeps it (the worker clears and snapshots it as opaque floats).
// The state holds the inputs as read (T rounded to f32 exactly), so it is bit-identical to the
// CPU kernel's state for the same T inputs, and prefill then decode == one prefill, bit for bit.
// sequences [num_seqs] DeviceRecurrentSequence (recurrent_sequence.cuh): any mix of prefills
// (num_tokens = T) and decodes (num_tokens = 1) in one launch.
//
// Design: one thread per (channel, sequence), looping over the sequence's tokens in order with
// the K taps and the K-1 previous inputs in registers (fixed-size arrays of kMaxK, right-aligned
// so every index is a compile-time constant after unrolling; leading taps are zero and add exact
// zeros). Loads and stores of a warp are 32 consecutive channels of one row (coalesced).
// Preconditions: 1 <= K <= kCausalConvMaxKernel; C >= 1; x_stride, out_stride >= C; sequences
// back to back with distinct slots in [0, num_slots) (or < 0: skipped); out overlaps neither x
// nor states. T: __nv_bfloat16, __half or float.
// Bound (H100): memory. Decode reads x and the (K-1)·C f32 state once and writes out and the
// state once per sequence: (K-1)·C·8 + C·2·sizeof(T) bytes (Qwen3-Next, C = 8192, K = 4: ~230
// KiB per layer per sequence, ~70 ns at 3.35 TB/s). Prefill reads x once and writes out once;
// its parallelism is C × sequences threads, each walking its T tokens serially (K FMAs and one
// expf per token), so a single long prompt is latency-bound at a few ns per token rather than
// bandwidth-bound (splitting tokens across blocks would need the state read before any block
// writes it: a second launch).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/recurrent_sequence.cuh"

namespace tessera::cuda {

inline constexpr int kCausalConvThreads = 128;
inline constexpr int kCausalConvMaxKernel = 8;

template <typename T, int kMaxK>
__global__ void __launch_bounds__(kCausalConvThreads)
    CausalConv1dKernel(const T* __restrict__ x, int64_t x_stride, const T* __restrict__ weight,
                       const DeviceRecurrentSequence* __restrict__ sequences,
                       float* __restrict__ states, T* __restrict__ out, int64_t out_stride,
                       int channels, int kernel_size, bool apply_silu) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const DeviceRecurrentSequence seq = sequences[blockIdx.y];
  if (c >= channels || seq.num_tokens <= 0 || seq.state_slot < 0) return;
  const int history = kernel_size - 1;
  const int lead = kMaxK - kernel_size;  // zero taps in front of the real ones
  float* state = states + static_cast<size_t>(seq.state_slot) * history * channels + c;
  // window[m] is the input tap m multiplies: window[kMaxK - 1] the current token, window[m] for
  // m < kMaxK - 1 the token kMaxK - 1 - m steps before it.
  float taps[kMaxK];
  float window[kMaxK];
  TESSERA_UNROLL
  for (int m = 0; m < kMaxK; ++m) {
    const int k = m - lead;
    taps[m] = k >= 0 ? ToFloat(weight[static_cast<size_t>(c) * kernel_size + k]) : 0.0f;
    window[m] = k >= 0 && k < history ? state[static_cast<size_t>(k) * channels] : 0.0f;
  }
  for (int t = 0; t < seq.num_tokens; ++t) {
    const int64_t row = static_cast<int64_t>(seq.token_begin) + t;
    window[kMaxK - 1] = ToFloat(x[row * x_stride + c]);
    float y = 0.0f;
    TESSERA_UNROLL
    for (int m = 0; m < kMaxK; ++m) y = fmaf(taps[m], window[m], y);
    if (apply_silu) y = y / (1.0f + expf(-y));
    out[row * out_stride + c] = FromFloat<T>(y);
    TESSERA_UNROLL
    for (int m = 0; m + 1 < kMaxK; ++m) window[m] = window[m + 1];
  }
  // State row r = the input K-1-r steps before the next token = window[r + lead].
  TESSERA_UNROLL
  for (int m = 0; m + 1 < kMaxK; ++m) {
    const int r = m - lead;
    if (r >= 0) state[static_cast<size_t>(r) * channels] = window[m];
  }
}

// Launches the conv over every sequence of the step (rows back to back from row 0).
// kernel_size in [1, kCausalConvMaxKernel]; num_seqs in [1, 65535].
template <class Launcher, typename T>
auto LaunchCausalConv1d(Launcher& launcher, const T* x, int64_t x_stride, const T* weight,
                        const DeviceRecurrentSequence* sequences, int num_seqs, float* states,
                        T* out, int64_t out_stride, int channels, int kernel_size,
                        bool apply_silu) {
  const LaunchShape shape{dim3(CeilDiv(channels, kCausalConvThreads), num_seqs),
                          dim3(kCausalConvThreads), 0};
  auto* kernel = kernel_size <= 4 ? CausalConv1dKernel<T, 4> : CausalConv1dKernel<T, 8>;
  return launcher.Launch(shape, kernel, x, x_stride, weight, sequences, states, out, out_stride,
                         channels, kernel_size, apply_silu);
}

}  // namespace tessera::cuda
