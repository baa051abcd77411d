// The kernels a device model runner launches, behind one virtual interface so the runner is
// ordinary C++ compiled once: each method picks the kernel template (kernels/cuda/*.cuh) for the
// data type and head size given at run time and launches it on the device runtime's stream.
// Two implementations of the same template (device_kernels_impl.h): the SIMT emulator's launcher
// (device_kernels_emulated.cc, the `emulated` device) and CudaLauncher (device_kernels_cuda.cu,
// nvcc, a real GPU). Activation/weight/KV element types are bf16, f16 or f32 (DataType).
//
// Every method enqueues work (or records it while the runtime captures a graph) and returns the
// launch status; an unsupported type or head size is INVALID_ARGUMENT (the runner checks what it
// needs at construction with SupportsHeadDim). Owned by its runner; step thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/block_tables.cuh"
#include "kernels/cuda/gated_delta_common.cuh"
#include "kernels/cuda/gguf_blocks.cuh"
#include "kernels/cuda/moe_grouped_gemm.cuh"
#include "kernels/cuda/moe_routing.cuh"
#include "kernels/cuda/packed_format.h"
#include "kernels/cuda/packed_stream_split.h"
#include "kernels/cuda/paged_decode_attention.cuh"
#include "kernels/cuda/paged_prefill_attention.cuh"
#include "kernels/cuda/logit_adjust.cuh"
#include "kernels/cuda/random_uniform.cuh"
#include "kernels/cuda/recurrent_sequence.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/sampling_types.h"
#include "kernels/device/device_runtime.h"

namespace tessera::worker {

// The gated delta rule's per-token inputs (gated_delta_common.cuh's GdnDeviceInputs<T>, untyped:
// q, k, v of the call's data type; g and beta f32).
struct GdnRuleInputs {
  const void* q = nullptr;
  int64_t q_stride = 0;
  const void* k = nullptr;
  int64_t k_stride = 0;
  const void* v = nullptr;
  int64_t v_stride = 0;
  const float* g = nullptr;
  const float* beta = nullptr;
};

// One grouped projection's expert weights (moe_expert_weights.cuh's ExpertStack, untyped): the
// dense stack of the call's data type, or the packed stack.
struct MoeExpertWeights {
  const void* dense = nullptr;  // [E, expert_rows, cols], at the view's first row
  int expert_rows = 0;          // dense: rows from one expert's matrix to the next's (0: rows)
  std::optional<cuda::PackedExperts> packed;
};

// The routed experts of one MoE layer (moe_grouped_gemm.cuh's MoeExpertsArgs<T, float>, untyped:
// x, the expert stacks and the gate/up scratch of the call's data type; y f32).
struct MoeExpertsInputs {
  const void* x = nullptr;  // [n, hidden]
  MoeExpertWeights gate_w;  // [E, ffn, hidden]
  MoeExpertWeights up_w;    // [E, ffn, hidden]
  MoeExpertWeights down_w;  // [E, hidden, ffn]
  void* gate = nullptr;     // scratch [n * k, ffn]
  void* up = nullptr;       // scratch [n * k, ffn]
  float* y = nullptr;       // [n * k, hidden], grouped row order
  int num_tokens = 0;
  int k = 0;
  int num_experts = 0;
  int hidden = 0;
  int ffn = 0;
};

// The arguments of DeviceKernels::RopeKvWrite (rope_kv_write.cuh): optional q/k/v biases, then
// RoPE and the KV write. q_in's, k's and v's token rows
// `q_stride` / `kv_stride` elements apart (separate tensors, or one [q | k | v] projection
// output), q_out [tokens, heads, head_dim] (q_in itself: rotated in place); the compute type;
// positions, slot_mapping [tokens]; cos_sin the RoPE table of max_positions rows.
struct RotaryKvWrite {
  cuda::RopeStyle style = cuda::RopeStyle::kNormal;
  const void* q_in = nullptr;
  void* q_out = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  int64_t q_stride = 0, kv_stride = 0;
  const void* q_bias = nullptr;  // [heads x head_dim], added first (null: none); k's and v's
  const void* k_bias = nullptr;  // are added in place
  const void* v_bias = nullptr;
  void* k_pool = nullptr;
  void* v_pool = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* slot_mapping = nullptr;
  const float* cos_sin = nullptr;
  int max_positions = 0;
  int num_tokens = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, rope_dim = 0;
};

class DeviceKernels {
 public:
  using DataType = device::DataType;
  virtual ~DeviceKernels() = default;

  // Head sizes the attention kernels are built for (32: the tiny hybrid test models).
  static bool SupportsHeadDim(int head_dim) {
    return head_dim == 32 || head_dim == 64 || head_dim == 80 || head_dim == 96 ||
           head_dim == 128 || head_dim == 256;
  }

  // out[t] = table[ids[t]] (table in its GGUF format), stored as `type`.
  virtual absl::Status Embedding(DataType type, cuda::GgufFormat table_format,
                                 const int32_t* ids, const void* table, void* out,
                                 int num_tokens, int64_t vocab, int hidden) = 0;
  // out = RmsNorm(x) * weight per row of `hidden` (residual null; kernels/cuda/rms_norm.cuh).
  virtual absl::Status RmsNorm(DataType type, const void* x, const void* weight, void* out,
                               int num_rows, int hidden, float eps) = 0;
  // residual += delta (stored rounded to `type`), then out = RmsNorm(residual) * weight per row:
  // the residual add fused into the next norm, one launch.
  virtual absl::Status AddRmsNorm(DataType type, void* residual, const void* delta,
                                  const void* weight, void* out, int num_rows, int hidden,
                                  float eps) = 0;
  // RoPE on q and k in place, then k and v through the slot mapping into the pools (slot -1
  // writes nothing): kernels/cuda/rope_kv_write.cuh, one launch.
  virtual absl::Status RopeKvWrite(DataType type, const RotaryKvWrite& args) = 0;
  // out = silu(in[:, :width]) * in[:, width:] for rows of [gate | up] (2 x width each).
  virtual absl::Status SwiGluHalves(DataType type, const void* in, void* out, int num_tokens,
                                    int width) = 0;
  // out = silu(gate) * up; out may be gate (each element is read before it is written).
  virtual absl::Status SwiGlu(DataType type, const void* gate, const void* up, void* out,
                              int num_tokens, int width) = 0;
  virtual absl::Status AddInPlace(DataType type, void* inout, const void* delta,
                                  int64_t count) = 0;
  virtual absl::Status AddBias(DataType type, void* inout, const void* bias, int rows,
                               int width) = 0;
  virtual absl::Status GatherRows(DataType type, const void* src, const int32_t* row_indices,
                                  void* dst, int num_rows, int width) = 0;
  virtual absl::Status DecodeAttention(DataType type, int head_dim,
                                       const cuda::PagedDecodeParams& params, const void* q,
                                       const void* k_pool, const void* v_pool,
                                       const int32_t* block_tables, const int32_t* context_lens,
                                       void* out, float* workspace) = 0;
  virtual absl::Status PrefillAttention(DataType type, int head_dim,
                                        const cuda::PagedPrefillParams& params, const void* q,
                                        const void* k_pool, const void* v_pool,
                                        const int32_t* block_tables,
                                        const int32_t* query_start_loc,
                                        const int32_t* context_lens, void* out) = 0;
  // c[m, n] = a[m, k] · b[n, k]ᵀ with a reduction order independent of m (batch invariant);
  // a and b of `type`, c of c_type.
  virtual absl::Status BatchInvariantGemm(DataType type, DataType c_type, const void* a,
                                          const void* b, void* c, int m, int n, int k) = 0;
  // y [m, w.n] = x [m, w.k] · Wᵀ over a packed weight (kernels/cuda/packed_linear.cuh), x and y
  // of `type` (bf16 or f16; f32 is INVALID_ARGUMENT), 16-byte aligned; `stream` the streaming
  // path's workspace (m <= 4; kernels/cuda/packed_stream_split.h).
  virtual absl::Status PackedLinear(DataType type, const void* x, int m,
                                    const cuda::PackedLinear& w, void* y,
                                    const cuda::PackedStreamWorkspace& stream) = 0;
  // out [m, w.n / 2] = silu(x · gateᵀ) · (x · upᵀ) of w = [gate | up] in one launch (the
  // streaming path's epilogue; packed_linear.cuh's PackedLinearSwiGluTakes(m, w) must hold).
  virtual absl::Status PackedLinearSwiGlu(DataType type, const void* x, int m,
                                          const cuda::PackedLinear& w, void* out,
                                          const cuda::PackedStreamWorkspace& stream) = 0;
  // Lets PackedLinear's streaming path (m <= 4) use its shared memory for `type`. Once per type,
  // before any step or capture (packed_linear.cuh's AllowPackedLinearSharedMemory).
  virtual absl::Status PreparePackedLinear(DataType type) = 0;
  // out [w.n, w.k] of `type` (bf16 or f16) = the packed weight dequantized
  // (kernels/cuda/packed_dequantize.cuh); out 16-byte aligned.
  virtual absl::Status PackedDequantize(DataType type, const cuda::PackedLinear& w,
                                        void* out) = 0;
  // out [rows, cols] bf16 = the GGUF rows `src` of `format` decoded (kernels/cuda/dequantize.cuh:
  // the cpu decoder's values rounded once): how dense weights are made at load.
  virtual absl::Status DequantizeToBf16(cuda::GgufFormat format, const void* src, void* out,
                                        int64_t rows, int64_t cols) = 0;
  // The hybrid layer kinds (worker/models/model_ops.h).
  // dst[r·dst_row + g·dst_group + j] = src[r·src_row + g·src_group + j] (elementwise.cuh).
  virtual absl::Status CopyColumnGroups(DataType type, const void* src, int64_t src_row,
                                        int64_t src_group, void* dst, int64_t dst_row,
                                        int64_t dst_group, int rows, int groups, int width) = 0;
  // inout *= sigmoid(gate), count elements (elementwise.cuh).
  virtual absl::Status SigmoidMul(DataType type, const void* gate, void* inout,
                                  int64_t count) = 0;
  // Causal conv1d + SiLU over every sequence's rows with the per-slot conv states
  // [slots, K-1, channels] f32 (causal_conv1d.cuh); weight [channels, K] of `type`.
  virtual absl::Status CausalConv1d(DataType type, const void* x, int64_t x_stride,
                                    const void* weight,
                                    const cuda::DeviceRecurrentSequence* sequences, int num_seqs,
                                    float* states, void* out, int64_t out_stride, int channels,
                                    int kernel_size) = 0;
  // g, beta [rows, heads] f32 from the pre-activation gates b, alpha of `type` (gdn_gates.cuh).
  virtual absl::Status GdnGates(DataType type, const void* b, int64_t b_stride, const void* alpha,
                                int64_t alpha_stride, const float* a_coef, const float* dt_bias,
                                int64_t rows, int heads, float* g, float* beta) = 0;
  // Lets GatedDeltaRule use the chunked form's shared memory for `type`. Once per type, before
  // any step or capture (gated_delta_rule.cuh's AllowGatedDeltaRuleSharedMemory).
  virtual absl::Status PrepareGatedDeltaRule(DataType type) = 0;
  // The rule over every sequence from its slot of `states` [slots, h_v, d_k, d_v] f32, each
  // sequence in the form kAuto picks (gated_delta_rule.cuh); out [rows, h_v, d_v] of `type`.
  virtual absl::Status GatedDeltaRule(DataType type, const cuda::GdnDeviceParams& params,
                                      const GdnRuleInputs& inputs,
                                      const cuda::DeviceRecurrentSequence* sequences,
                                      int num_seqs, float* states, void* out) = 0;
  // y = RmsNorm(x) * weight * silu(z) per (token, head) row of d (gated_rms_norm.cuh).
  virtual absl::Status GatedRmsNorm(DataType type, const void* x, const void* z,
                                    int64_t z_token_stride, const void* weight, void* y,
                                    int64_t num_tokens, int heads, int d, float eps) = 0;
  // Router logits [n, E] f32 (softmaxed in place) -> top-k experts and weights, then the
  // grouping by expert and the grouped GEMM's tile list (moe_routing.cuh).
  virtual absl::Status MoeRouting(float* logits, int num_tokens, int num_experts, int k,
                                  bool normalize, int32_t* expert_ids, float* weights,
                                  const cuda::MoeGroupsView& groups) = 0;
  // Gate and up of every token's experts, SwiGLU, down into y (moe_grouped_gemm.cuh).
  virtual absl::Status MoeExperts(DataType type, const cuda::MoeGemmGroups& groups,
                                  const MoeExpertsInputs& inputs) = 0;
  // out [n, hidden] = Σ_r w[t, r] · y[slot_rows[t k + r]] + sigmoid(shared gate) · shared
  // (moe_grouped_gemm.cuh); shared and shared_gate_logits may be null.
  virtual absl::Status MoeCombine(DataType type, const float* y, const float* weights,
                                  const int32_t* slot_rows, const void* shared,
                                  const float* shared_gate_logits, void* out, int num_tokens,
                                  int k, int hidden) = 0;
  // Block tables (block_tables.cuh): deltas into the persistent per-slot tables, then the
  // step's rows gathered from them.
  virtual absl::Status ScatterTableDeltas(const cuda::TableDelta* deltas, const int32_t* count,
                                          int32_t* tables, int64_t table_entries) = 0;
  virtual absl::Status GatherTableRows(const int32_t* tables, const int32_t* row_slots,
                                       int32_t* out, int num_rows, int stride) = 0;
  // Lets Sampling serve `vocab` (its penalty bitmap in shared memory may need more than CUDA's
  // default 48 KiB). Once, before any step or capture; FAILED_PRECONDITION naming the sizes
  // when the device cannot give one block that much.
  virtual absl::Status PrepareSampling(int vocab) = 0;
  // workspace: cuda::SamplingWorkspaceBytes(num_rows or more, vocab) bytes (sampling_chunks.cuh).
  virtual absl::Status Sampling(const float* logits, int num_rows, int vocab,
                                const cuda::SamplingRowParams* params,
                                const cuda::SamplingPenalties& penalties,
                                const cuda::SamplingOutputs& outputs, void* workspace) = 0;
  // logit_bias then the structured-output mask, in place (logit_adjust.cuh).
  virtual absl::Status AdjustLogits(float* logits, int num_rows, int vocab,
                                    const cuda::LogitAdjustments& adjust) = 0;
  // out[i] = center + scale * u(seed, stream, i), u in (-1, 1), stored as `type`
  // (random_uniform.cuh): synthetic weights made on the device.
  virtual absl::Status RandomUniform(DataType type, void* out, int64_t count,
                                     const cuda::RandomUniformParams& params) = 0;
};

// The kernels for `runtime` (emulated or cuda); UNAVAILABLE when this build cannot launch on it.
// The runtime must outlive the result.
absl::StatusOr<std::unique_ptr<DeviceKernels>> MakeDeviceKernels(device::DeviceRuntime& runtime);
// The `cuda` half of MakeDeviceKernels: device_kernels_cuda.cu (nvcc), or
// device_kernels_no_cuda.cc (UNAVAILABLE) in builds without CUDA.
absl::StatusOr<std::unique_ptr<DeviceKernels>> MakeCudaKernels(device::DeviceRuntime& runtime);

}  // namespace tessera::worker
