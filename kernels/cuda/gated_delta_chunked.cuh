// Chunked (WY) form of the gated delta rule on CUDA cores; see gated_delta_rule.cuh for the math,
// shapes, preconditions and bound. One block per (32 value columns, value head, sequence) walks
// the sequence's chunks of kGdnChunkSize tokens in order, with its [d_k, 32] tile of the state in
// shared memory (read from the pool once, written back once). Per chunk of n tokens (t, s < n,
// γ_t = Σ_{s≤t} g_s inside the chunk):
//   load     q̂, k̂ [n, d_k] (one warp per token row: L2 norms by warp sums), γ, β, e^{γ_t},
//            e^{γ_n−γ_t}
//   scores   A[t][s] = β_t (k̂_t·k̂_s) e^{γ_t−γ_s} (s < t)
//            P[t][s] = (q̂_t·k̂_s) e^{γ_t−γ_s} (s ≤ t)
//   inverse  T = (I + A)⁻¹ by forward substitution, row by row, in place over A (strictly lower
//            part; the unit diagonal is implicit)
//   columns  B = β ⊙ (V − e^{γ} ⊙ (K̂ S)),  V' = T B  (= U − W S of the CPU kernel, with
//            W S = T (β e^{γ} ⊙ K̂) S regrouped as T (β e^{γ} ⊙ (K̂ S)): no [n, d_k] W buffer)
//            O = e^{γ} ⊙ (Q̂ S) + P V'  → out
//            S ← e^{γ_n} S + Σ_t (e^{γ_n−γ_t} k̂_t) ⊗ V'_t
// A, T and P depend only on the head, so the d_v / 32 column blocks of one head each recompute
// them (the price of d_v / 32 times more blocks for a prefill of few sequences).
// Shared memory: static A/T and P [64, 64], B [64, 32] and four [64] vectors (41 KiB); dynamic
// (opt-in above 48 KiB in all: AllowGatedDeltaRuleSharedMemory) q̂ and k̂ with an odd row stride
// (conflict-free column reads), the state tile and V' [64, 32]: 209.5 KiB in all at d_k = 256,
// 129.5 KiB at d_k = 128 (one block per SM on H100).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gated_delta_common.cuh"

namespace tessera::cuda {

// Row stride of the q̂ and k̂ tiles: d_k rounded up to an odd number.
__host__ __device__ constexpr int GdnChunkRowStride(int d_k) { return d_k | 1; }

// Floats of the chunked kernel's dynamic shared memory at head_k_dim d_k: q̂, k̂, the state tile
// and V' (the d_k-independent tiles are static, GdnChunkedKernel).
__host__ __device__ constexpr size_t GdnChunkedSharedFloats(int d_k) {
  constexpr size_t kC = kGdnChunkSize;
  return 2 * kC * GdnChunkRowStride(d_k) + static_cast<size_t>(d_k) * kGdnColumns +
         kC * kGdnColumns;
}

inline size_t GdnChunkedSharedBytes(int d_k) { return GdnChunkedSharedFloats(d_k) * sizeof(float); }

struct GdnChunkTiles {
  float* q_hat;         // [C, ld]
  float* k_hat;         // [C, ld]
  float* state;         // [d_k, kGdnColumns]: this block's columns of S
  float* v_new;         // [C, kGdnColumns]: V'
  float* a_then_t;      // [C, C]: A, then the strictly lower part of T
  float* p_scores;      // [C, C]
  float* b_cols;        // [C, kGdnColumns]: B
  float* gamma;         // [C]
  float* beta;          // [C]
  float* exp_gamma;     // [C]: e^{γ_t}
  float* decay_to_end;  // [C]: e^{γ_{n-1} − γ_t}
  int ld;
};

// Loads the chunk's q̂, k̂ (warp w takes token rows w, w + 8, ...; each lane scales the elements
// it loaded, so no barrier is needed between load and scale), γ and β (thread 0, in token
// order, as the CPU kernel sums them), then e^{γ_t} and e^{γ_{n-1}−γ_t}. Ends with a barrier.
template <typename T>
__device__ __forceinline__ void GdnLoadChunk(const GdnDeviceParams& p, const GdnDeviceInputs<T>& in,
                                             int64_t first_row, int n, int h,
                                             const GdnChunkTiles& tiles) {
  const int lane = threadIdx.x % 32;
  const int d_k = p.head_k_dim;
  const int64_t head_offset = static_cast<int64_t>(GdnKHead(p, h)) * d_k;
  for (int t = threadIdx.x / 32; t < n; t += kGdnWarps) {
    const int64_t row = first_row + t;
    float* q_row = tiles.q_hat + t * tiles.ld;
    float* k_row = tiles.k_hat + t * tiles.ld;
    const T* q = in.q + row * in.q_stride + head_offset;
    const T* k = in.k + row * in.k_stride + head_offset;
    float q_squares = 0.0f;
    for (int i = lane; i < d_k; i += 32) {
      q_row[i] = ToFloat(q[i]);
      q_squares = fmaf(q_row[i], q_row[i], q_squares);
    }
    float k_squares = 0.0f;
    for (int i = lane; i < d_k; i += 32) {
      k_row[i] = ToFloat(k[i]);
      k_squares = fmaf(k_row[i], k_row[i], k_squares);
    }
    float q_factor = p.q_scale;
    float k_factor = 1.0f;
    if (p.l2_normalize_qk) {
      q_factor = p.q_scale * rsqrtf(WarpSum(q_squares) + p.l2_eps);
      k_factor = rsqrtf(WarpSum(k_squares) + p.l2_eps);
    }
    for (int i = lane; i < d_k; i += 32) {
      q_row[i] *= q_factor;
      k_row[i] *= k_factor;
    }
  }
  if (threadIdx.x == 0) {
    float cumulative = 0.0f;
    for (int t = 0; t < n; ++t) {
      cumulative += in.g[(first_row + t) * p.num_v_heads + h];
      tiles.gamma[t] = cumulative;
      tiles.beta[t] = in.beta[(first_row + t) * p.num_v_heads + h];
    }
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t < n) {
    tiles.exp_gamma[t] = expf(tiles.gamma[t]);
    tiles.decay_to_end[t] = expf(tiles.gamma[n - 1] - tiles.gamma[t]);
  }
  __syncthreads();
}

// A (strictly lower) and P (lower with the diagonal), zeros elsewhere. Ends with a barrier.
__device__ __forceinline__ void GdnChunkScores(int n, int d_k, const GdnChunkTiles& tiles) {
  constexpr int kC = kGdnChunkSize;
  for (int e = threadIdx.x; e < kC * kC; e += kGdnThreads) {
    const int t = e / kC;
    const int s = e % kC;
    float a = 0.0f;
    float score = 0.0f;
    if (t < n && s <= t) {
      const float* q_t = tiles.q_hat + t * tiles.ld;
      const float* k_t = tiles.k_hat + t * tiles.ld;
      const float* k_s = tiles.k_hat + s * tiles.ld;
      float kk = 0.0f;
      float qk = 0.0f;
      for (int i = 0; i < d_k; ++i) {
        kk = fmaf(k_t[i], k_s[i], kk);
        qk = fmaf(q_t[i], k_s[i], qk);
      }
      const float decay = expf(tiles.gamma[t] - tiles.gamma[s]);
      if (s < t) a = kk * (tiles.beta[t] * decay);
      score = qk * decay;
    }
    tiles.a_then_t[e] = a;
    tiles.p_scores[e] = score;
  }
  __syncthreads();
}

// T = (I + A)⁻¹ in place: row t of T's strictly lower part is
//   T[t][c] = −(A[t][c] + Σ_{c<m<t} A[t][m] T[m][c])      (T[c][c] = 1 folded in)
// from rows m < t already inverted; thread c computes column c, then the row is stored after a
// barrier (the sums read A[t][·], which the stores overwrite).
__device__ __forceinline__ void GdnChunkInverse(int n, const GdnChunkTiles& tiles) {
  constexpr int kC = kGdnChunkSize;
  float* m = tiles.a_then_t;
  const int c = threadIdx.x;
  for (int t = 1; t < n; ++t) {
    float value = 0.0f;
    if (c < t) {
      float sum = m[t * kC + c];
      for (int k = c + 1; k < t; ++k) sum = fmaf(m[t * kC + k], m[k * kC + c], sum);
      value = -sum;
    }
    __syncthreads();
    if (c < t) m[t * kC + c] = value;
    __syncthreads();
  }
}

// B = β ⊙ (V − e^{γ} ⊙ (K̂ S)) then V' = T B, for this block's columns. Ends with a barrier.
template <typename T>
__device__ __forceinline__ void GdnChunkNewValues(const GdnDeviceParams& p,
                                                  const GdnDeviceInputs<T>& in, int64_t first_row,
                                                  int n, int h, int column0, int width,
                                                  const GdnChunkTiles& tiles) {
  constexpr int kC = kGdnChunkSize;
  for (int e = threadIdx.x; e < n * kGdnColumns; e += kGdnThreads) {
    const int t = e / kGdnColumns;
    const int j = e % kGdnColumns;
    float b = 0.0f;
    if (j < width) {
      const float* k_t = tiles.k_hat + t * tiles.ld;
      float k_s = 0.0f;
      for (int i = 0; i < p.head_k_dim; ++i)
        k_s = fmaf(k_t[i], tiles.state[i * kGdnColumns + j], k_s);
      const int64_t v_index =
          (first_row + t) * in.v_stride + static_cast<int64_t>(h) * p.head_v_dim + column0 + j;
      b = tiles.beta[t] * (ToFloat(in.v[v_index]) - tiles.exp_gamma[t] * k_s);
    }
    tiles.b_cols[e] = b;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n * kGdnColumns; e += kGdnThreads) {
    const int t = e / kGdnColumns;
    const int j = e % kGdnColumns;
    float sum = tiles.b_cols[e];
    for (int m = 0; m < t; ++m) {
      sum = fmaf(tiles.a_then_t[t * kC + m], tiles.b_cols[m * kGdnColumns + j], sum);
    }
    tiles.v_new[e] = sum;
  }
  __syncthreads();
}

// O = e^{γ} ⊙ (Q̂ S) + P V' into out, then S ← e^{γ_n} S + Σ_t (e^{γ_n−γ_t} k̂_t) ⊗ V'_t. Ends
// with a barrier.
template <typename T>
__device__ __forceinline__ void GdnChunkOutputAndState(const GdnDeviceParams& p, int64_t first_row,
                                                       int n, int h, int column0, int width,
                                                       const GdnChunkTiles& tiles, T* out) {
  constexpr int kC = kGdnChunkSize;
  const int d_k = p.head_k_dim;
  for (int e = threadIdx.x; e < n * kGdnColumns; e += kGdnThreads) {
    const int t = e / kGdnColumns;
    const int j = e % kGdnColumns;
    if (j >= width) continue;
    const float* q_t = tiles.q_hat + t * tiles.ld;
    float q_s = 0.0f;
    for (int i = 0; i < d_k; ++i) q_s = fmaf(q_t[i], tiles.state[i * kGdnColumns + j], q_s);
    float o = tiles.exp_gamma[t] * q_s;
    for (int s = 0; s <= t; ++s)
      o = fmaf(tiles.p_scores[t * kC + s], tiles.v_new[s * kGdnColumns + j], o);
    const int64_t row = first_row + t;
    out[(row * p.num_v_heads + h) * p.head_v_dim + column0 + j] = FromFloat<T>(o);
  }
  __syncthreads();  // every output has read the chunk's initial state
  const float total_decay = tiles.exp_gamma[n - 1];
  for (int e = threadIdx.x; e < d_k * kGdnColumns; e += kGdnThreads) {
    const int i = e / kGdnColumns;
    const int j = e % kGdnColumns;
    float s = total_decay * tiles.state[e];
    for (int t = 0; t < n; ++t) {
      s = fmaf(tiles.k_hat[t * tiles.ld + i] * tiles.decay_to_end[t],
               tiles.v_new[t * kGdnColumns + j], s);
    }
    tiles.state[e] = s;
  }
  __syncthreads();
}

template <typename T>
__global__ void __launch_bounds__(kGdnThreads)
    GdnChunkedKernel(GdnDeviceParams p, GdnDeviceInputs<T> in,
                     const DeviceRecurrentSequence* __restrict__ sequences, float* states,
                     T* __restrict__ out, GdnForm form) {
  constexpr int kC = kGdnChunkSize;
  TESSERA_SHARED(float, a_then_t, kC* kC);
  TESSERA_SHARED(float, p_scores, kC* kC);
  TESSERA_SHARED(float, b_cols, kC* kGdnColumns);
  TESSERA_SHARED(float, vectors, 4 * kC);
  TESSERA_DYNAMIC_SHARED(float, dynamic);
  const DeviceRecurrentSequence seq = sequences[blockIdx.z];
  if (!GdnSequenceRuns(seq, form, /*chunked_kernel=*/true)) return;
  const int h = blockIdx.y;
  const int column0 = blockIdx.x * kGdnColumns;
  const int width = p.head_v_dim - column0 < kGdnColumns ? p.head_v_dim - column0 : kGdnColumns;
  const int ld = GdnChunkRowStride(p.head_k_dim);
  const GdnChunkTiles tiles{dynamic,
                            dynamic + kC * ld,
                            dynamic + 2 * kC * ld,
                            dynamic + 2 * kC * ld + p.head_k_dim * kGdnColumns,
                            a_then_t,
                            p_scores,
                            b_cols,
                            vectors,
                            vectors + kC,
                            vectors + 2 * kC,
                            vectors + 3 * kC,
                            ld};
  float* head_state = GdnHeadState(states, p, seq.state_slot, h) + column0;
  const int tile_elements = p.head_k_dim * kGdnColumns;
  for (int e = threadIdx.x; e < tile_elements; e += kGdnThreads) {
    const int i = e / kGdnColumns;
    const int j = e % kGdnColumns;
    tiles.state[e] = j < width ? head_state[static_cast<size_t>(i) * p.head_v_dim + j] : 0.0f;
  }
  // The first chunk's load stage has barriers before the state tile is read.
  for (int c0 = 0; c0 < seq.num_tokens; c0 += kGdnChunkSize) {
    const int n = seq.num_tokens - c0 < kGdnChunkSize ? seq.num_tokens - c0 : kGdnChunkSize;
    const int64_t first_row = static_cast<int64_t>(seq.token_begin) + c0;
    GdnLoadChunk(p, in, first_row, n, h, tiles);
    GdnChunkScores(n, p.head_k_dim, tiles);
    GdnChunkInverse(n, tiles);
    GdnChunkNewValues(p, in, first_row, n, h, column0, width, tiles);
    GdnChunkOutputAndState(p, first_row, n, h, column0, width, tiles, out);
  }
  for (int e = threadIdx.x; e < tile_elements; e += kGdnThreads) {
    const int i = e / kGdnColumns;
    const int j = e % kGdnColumns;
    if (j < width) head_state[static_cast<size_t>(i) * p.head_v_dim + j] = tiles.state[e];
  }
}

}  // namespace tessera::cuda
