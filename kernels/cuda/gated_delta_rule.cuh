// Gated delta rule of Gated DeltaNet linear-attention layers (Qwen3-Next, Qwen3.5) on CUDA: the
// device twin of kernels/cpu/gated_delta_rule.h, whose header states the math. Per sequence and
// value head h (k head kh = h / r, kGrouped, or h % h_k, kTiled), per token:
//   q̂ = q / sqrt(Σq² + eps) · q_scale   k̂ = k / sqrt(Σk² + eps)   (L2 norm and scale done here)
//   S ← e^g S;   u = β (v − Sᵀk̂);   S ← S + k̂ ⊗ u;   o = Sᵀq̂
// in two forms (gated_delta_recurrent.cuh, gated_delta_chunked.cuh), chosen per launch or, with
// GdnForm::kAuto, per sequence at the CPU's switch point kGdnMinChunkedTokens.
//
// Shapes (rows = the step's tokens, sequences back to back from row 0):
//   q, k [rows, h_k, d_k], v [rows, h_v, d_v] of T: row views with strides (into the conv
//   output); g, beta [rows, h_v] f32 (gdn_gates.cuh)
//   out [rows, h_v, d_v] of T, contiguous: the activation type, since the next op, the gated
//   RMSNorm (gated_rms_norm.cuh), reads T; each element is rounded to T once from f32
//   states [num_slots, h_v, d_k, d_v] f32: HF's layout, the SAME as the CPU kernel's (the worker
//   clears and snapshots slots as opaque floats; states may move between backends)
//   sequences [num_seqs] DeviceRecurrentSequence; num_tokens 0 or slot < 0: nothing read/written
// Numerics: f32 throughout (q/k norms by f32 warp/block sums, the CPU sums in f64), so results
// match the CPU kernel within the tolerances of gated_delta_rule_test.cc, not bit for bit; each
// (sequence, head) is computed by blocks that see only its rows and state, so a sequence's
// results do not depend on the other sequences of the launch. The chunked form equals the
// recurrence within kChunkedTol (2e-5 absolute at the tests' scales).
// Preconditions: params valid (h_v a multiple of h_k; d_k, d_v in [1, kGdnMaxHeadDim]); strides
// >= row widths; distinct slots; out overlaps no input and no state; num_seqs, h_v <= 65535; for
// any form but kRecurrent, AllowGatedDeltaRuleSharedMemory<T>(launcher) succeeded on this
// launcher (the chunked kernel needs more than 48 KiB of shared memory).
//
// Bound (H100, 3.35 TB/s HBM; 989 TFLOP/s bf16 tensor / 67 TFLOP/s f32 CUDA cores):
//  * Recurrent (decode): memory. The state is read and written once per sequence per launch:
//    2 · h_v · d_k · d_v · 4 bytes (Qwen3-Next, h_v = 32, d = 128: 2 MiB read + 2 MiB written per
//    layer per sequence, ~1.25 us per layer per sequence) plus q, k, v once. The token loop adds
//    ~4 d_k·d_v FLOPs per head per token against registers, far below the CUDA-core peak; grid
//    d_v/32 · h_v · num_seqs blocks (128 per sequence for Qwen3-Next).
//  * Chunked (prefill): CUDA-core FMAs from shared memory (~1 shared load per FMA), so
//    shared-memory bandwidth bounds it at roughly a quarter of the f32 peak, ~15 TFLOP/s. Per
//    chunk of 64 and head: A and P 2·64²/2·d_k per column block (recomputed by each of the d_v/32
//    blocks), K̂S and Q̂S 2·64·d_k·d_v, T·B and P·V' 64²·d_v, the state update 64·d_k·d_v MACs:
//    ~5.8 M MACs at d = 128, ~90 k MACs per token and head: ~0.4 us per token per layer at
//    h_v = 32. A tensor-core version (mma.sync on the 64×d_k tiles, as FLA's chunk kernels) would
//    approach the HBM bound of reading q, k, v once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gated_delta_chunked.cuh"
#include "kernels/cuda/gated_delta_common.cuh"
#include "kernels/cuda/gated_delta_recurrent.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/launch_status.h"

namespace tessera::cuda {

// Lets this launcher's chunked launches use their shared memory (41 KiB static + up to 168.5 KiB
// dynamic, above CUDA's default 48 KiB in all at every d_k): opts in for the largest head_k_dim,
// kGdnMaxHeadDim, so one call serves every layer shape. Once per launcher and T, before the first
// launch (and before any graph capture).
template <typename T, class Launcher>
auto AllowGatedDeltaRuleSharedMemory(Launcher& launcher) {
  return launcher.AllowDynamicShared(GdnChunkedKernel<T>, GdnChunkedSharedBytes(kGdnMaxHeadDim));
}

// Runs the rule for every sequence from the state in its slot, writes out and leaves each slot
// holding the state after its last token. kRecurrent: one launch of the recurrent kernel;
// kChunked: one launch of the chunked kernel; kAuto: both, each skipping the other's sequences.
template <class Launcher, typename T>
auto LaunchGatedDeltaRule(Launcher& launcher, const GdnDeviceParams& params,
                          const GdnDeviceInputs<T>& inputs,
                          const DeviceRecurrentSequence* sequences, int num_seqs, float* states,
                          T* out, GdnForm form) {
  const dim3 grid(CeilDiv(params.head_v_dim, kGdnColumns), params.num_v_heads, num_seqs);
  if (form != GdnForm::kChunked) {
    auto status = launcher.Launch(LaunchShape{grid, dim3(kGdnThreads), 0}, GdnRecurrentKernel<T>,
                                  params, inputs, sequences, states, out, form);
    if (form == GdnForm::kRecurrent || !LaunchSucceeded(status)) return status;
  }
  const LaunchShape chunked{grid, dim3(kGdnThreads), GdnChunkedSharedBytes(params.head_k_dim)};
  return launcher.Launch(chunked, GdnChunkedKernel<T>, params, inputs, sequences, states, out,
                         form);
}

}  // namespace tessera::cuda
