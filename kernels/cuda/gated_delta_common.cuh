// Shared definitions of the gated delta rule's CUDA kernels (gated_delta_recurrent.cuh,
// gated_delta_chunked.cuh; launched through gated_delta_rule.cuh, which states the math, shapes
// and bounds): parameters, inputs, the head mapping, the per-sequence form choice and the state
// addressing. The enums and constants mirror kernels/cpu/gated_delta_rule.h (device code does not
// include the CPU kernels' headers); the kernel tests check they agree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/recurrent_sequence.cuh"

namespace tessera::cuda {

inline constexpr int kGdnChunkSize = 64;        // = kernels::cpu::kGdnChunkSize
inline constexpr int kGdnMinChunkedTokens = 8;  // = kernels::cpu::kGdnMinChunkedTokens
inline constexpr int kGdnMaxHeadDim = 256;      // d_k and d_v (the published models: 128)
inline constexpr int kGdnColumns = 32;          // value columns (of S and out) per block
inline constexpr int kGdnWarps = 8;
inline constexpr int kGdnThreads = 32 * kGdnWarps;
static_assert(kGdnThreads >= kGdnMaxHeadDim, "one thread per element of q and k");

// Which k head serves value head h when h_v = r · h_k (kernels/cpu/gated_delta_rule.h).
enum class GdnHeadMapping : int {
  kGrouped,  // kh = h / r (HF repeat_interleave; qwen3next GGUFs)
  kTiled,    // kh = h % h_k (ggml's broadcast; qwen35 GGUFs)
};

enum class GdnForm : int {
  kRecurrent,  // token by token (decode)
  kChunked,    // chunks of kGdnChunkSize in the WY form (prefill)
  kAuto,       // per sequence: recurrent below kGdnMinChunkedTokens tokens, chunked from there
};

struct GdnDeviceParams {
  int num_k_heads = 0;  // h_k >= 1
  int num_v_heads = 0;  // h_v, a positive multiple of h_k
  int head_k_dim = 0;   // d_k in [1, kGdnMaxHeadDim]
  int head_v_dim = 0;   // d_v in [1, kGdnMaxHeadDim]
  GdnHeadMapping head_mapping = GdnHeadMapping::kGrouped;
  bool l2_normalize_qk = true;
  float l2_eps = 1e-6f;
  float q_scale = 1.0f;  // the models: 1 / sqrt(d_k)
};

// The step's per-token inputs. q, k [rows, h_k, d_k] and v [rows, h_v, d_v] of T are row views
// (row r at r * stride elements, typically into the conv output); g (log-decay, finite, <= 0) and
// beta [rows, h_v] f32 contiguous (gdn_gates.cuh).
template <typename T>
struct GdnDeviceInputs {
  const T* q = nullptr;
  int64_t q_stride = 0;
  const T* k = nullptr;
  int64_t k_stride = 0;
  const T* v = nullptr;
  int64_t v_stride = 0;
  const float* g = nullptr;
  const float* beta = nullptr;
};

__device__ __forceinline__ int GdnKHead(const GdnDeviceParams& p, int h) {
  return p.head_mapping == GdnHeadMapping::kGrouped ? h / (p.num_v_heads / p.num_k_heads)
                                                    : h % p.num_k_heads;
}

__device__ __forceinline__ bool GdnUsesChunkedForm(GdnForm form, int num_tokens) {
  if (form == GdnForm::kAuto) return num_tokens >= kGdnMinChunkedTokens;
  return form == GdnForm::kChunked;
}

// Whether this block's sequence has work for a kernel of the given form.
__device__ __forceinline__ bool GdnSequenceRuns(const DeviceRecurrentSequence& seq, GdnForm form,
                                                bool chunked_kernel) {
  return seq.num_tokens > 0 && seq.state_slot >= 0 &&
         GdnUsesChunkedForm(form, seq.num_tokens) == chunked_kernel;
}

// State [d_k, d_v] of value head h in slot `slot` of the pool [num_slots, h_v, d_k, d_v] f32.
__device__ __forceinline__ float* GdnHeadState(float* states, const GdnDeviceParams& p, int slot,
                                               int h) {
  const size_t head_elements = static_cast<size_t>(p.head_k_dim) * p.head_v_dim;
  return states + (static_cast<size_t>(slot) * p.num_v_heads + h) * head_elements;
}

}  // namespace tessera::cuda
