// Recurrent (token-by-token) form of the gated delta rule on CUDA cores; see gated_delta_rule.cuh
// for the math, shapes, preconditions and bound. One block per (32 value columns, value head,
// sequence): lane l of every warp owns column j = blockIdx.x · 32 + l of the head's state S
// [d_k, d_v], warp w owns rows i ≡ w (mod 8), so each thread keeps up to 32 entries of S in
// registers for the whole sequence (read from the pool once, written back once). Per token the
// block loads and L2-normalises q and k into shared memory (two block sums), then per column:
//   S ← e^g S;  Sᵀk̂ (each thread's rows, then the 8 warps' partials summed in order);
//   u = β (v − Sᵀk̂);  S ← S + k̂ ⊗ u;  o = Sᵀq̂ (the same two-level sum)
// reading no earlier token. Columns past d_v hold zeros and store nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gated_delta_common.cuh"

namespace tessera::cuda {

inline constexpr int kGdnRowsPerThread = kGdnMaxHeadDim / kGdnWarps;

// q̂ (into qk[0, d_k)) and k̂ (into qk[kGdnMaxHeadDim, +d_k)) of k head kh at `row`: thread i
// loads element i; two block sums for the norms. Ends with a barrier: qk is ready for all.
template <typename T>
__device__ __forceinline__ void GdnLoadNormalizedQk(const GdnDeviceParams& p,
                                                    const GdnDeviceInputs<T>& in, int64_t row,
                                                    int kh, float* qk, float* scratch) {
  const int i = threadIdx.x;
  const int64_t offset = static_cast<int64_t>(kh) * p.head_k_dim + i;
  float q = 0.0f;
  float k = 0.0f;
  if (i < p.head_k_dim) {
    q = ToFloat(in.q[row * in.q_stride + offset]);
    k = ToFloat(in.k[row * in.k_stride + offset]);
  }
  float q_factor = p.q_scale;
  float k_factor = 1.0f;
  if (p.l2_normalize_qk) {
    q_factor = p.q_scale * rsqrtf(BlockSum(q * q, scratch) + p.l2_eps);
    k_factor = rsqrtf(BlockSum(k * k, scratch) + p.l2_eps);
  }
  if (i < p.head_k_dim) {
    qk[i] = q * q_factor;
    qk[kGdnMaxHeadDim + i] = k * k_factor;
  }
  __syncthreads();
}

// Σ over the block's 8 warps of `partial` for this lane's column, in warp order; every thread
// gets its column's sum. Two barriers: partials is free again when it returns.
__device__ __forceinline__ float GdnColumnSum(float partial, float* partials) {
  const int lane = threadIdx.x % 32;
  partials[threadIdx.x] = partial;
  __syncthreads();
  float sum = 0.0f;
  TESSERA_UNROLL
  for (int w = 0; w < kGdnWarps; ++w) sum += partials[w * 32 + lane];
  __syncthreads();
  return sum;
}

// (kGdnThreads, 1): with no minimum stated, ptxas for sm_100a kept the f32 kernel under ~128
// registers and spilled 16 bytes; stating one block per SM lets it use 230 (sm_90a: 118).
template <typename T>
__global__ void __launch_bounds__(kGdnThreads, 1)
    GdnRecurrentKernel(GdnDeviceParams p, GdnDeviceInputs<T> in,
                       const DeviceRecurrentSequence* __restrict__ sequences, float* states,
                       T* __restrict__ out, GdnForm form) {
  TESSERA_SHARED(float, qk, 2 * kGdnMaxHeadDim);
  TESSERA_SHARED(float, partials, kGdnThreads);
  TESSERA_SHARED(float, scratch, 32);
  const DeviceRecurrentSequence seq = sequences[blockIdx.z];
  if (!GdnSequenceRuns(seq, form, /*chunked_kernel=*/false)) return;
  const int h = blockIdx.y;
  const int kh = GdnKHead(p, h);
  const int warp = threadIdx.x / 32;
  const int column = blockIdx.x * kGdnColumns + threadIdx.x % 32;
  const bool owns_column = column < p.head_v_dim;
  float* state = GdnHeadState(states, p, seq.state_slot, h);
  const float* q_hat = qk;
  const float* k_hat = qk + kGdnMaxHeadDim;
  float s[kGdnRowsPerThread];  // s[r] = S[warp + 8r][column]
  TESSERA_UNROLL
  for (int r = 0; r < kGdnRowsPerThread; ++r) {
    const int i = warp + r * kGdnWarps;
    s[r] = owns_column && i < p.head_k_dim ? state[static_cast<size_t>(i) * p.head_v_dim + column]
                                           : 0.0f;
  }
  for (int t = 0; t < seq.num_tokens; ++t) {
    const int64_t row = static_cast<int64_t>(seq.token_begin) + t;
    GdnLoadNormalizedQk(p, in, row, kh, qk, scratch);
    const float decay = expf(in.g[row * p.num_v_heads + h]);
    const float beta = in.beta[row * p.num_v_heads + h];
    float partial = 0.0f;
    TESSERA_UNROLL
    for (int r = 0; r < kGdnRowsPerThread; ++r) {
      const int i = warp + r * kGdnWarps;
      if (i < p.head_k_dim) {
        s[r] *= decay;
        partial = fmaf(s[r], k_hat[i], partial);
      }
    }
    const float s_t_k = GdnColumnSum(partial, partials);
    const int64_t v_offset = static_cast<int64_t>(h) * p.head_v_dim + column;
    const float v = owns_column ? ToFloat(in.v[row * in.v_stride + v_offset]) : 0.0f;
    const float u = beta * (v - s_t_k);
    partial = 0.0f;
    TESSERA_UNROLL
    for (int r = 0; r < kGdnRowsPerThread; ++r) {
      const int i = warp + r * kGdnWarps;
      if (i < p.head_k_dim) {
        s[r] = fmaf(k_hat[i], u, s[r]);
        partial = fmaf(s[r], q_hat[i], partial);
      }
    }
    const float o = GdnColumnSum(partial, partials);
    if (warp == 0 && owns_column) {
      out[row * p.num_v_heads * p.head_v_dim + v_offset] = FromFloat<T>(o);
    }
  }
  TESSERA_UNROLL
  for (int r = 0; r < kGdnRowsPerThread; ++r) {
    const int i = warp + r * kGdnWarps;
    if (owns_column && i < p.head_k_dim) {
      state[static_cast<size_t>(i) * p.head_v_dim + column] = s[r];
    }
  }
}

}  // namespace tessera::cuda
