// DeviceKernelsFor<Launcher>: the DeviceKernels interface (device_kernels.h) over one launcher
// type, dispatching the run-time data type and head size to the kernel templates. Included by
// exactly two translation units: device_kernels_emulated.cc (the SIMT emulator's launcher, g++)
// and device_kernels_cuda.cu (CudaLauncher, nvcc). `ToStatus` turns the launcher's status into
// an absl::Status (absl::Status itself for the emulator, cudaError_t for CUDA).
#pragma once

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/batch_invariant_gemm.cuh"
#include "kernels/cuda/block_tables.cuh"
#include "kernels/cuda/causal_conv1d.cuh"
#include "kernels/cuda/dequantize.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/gated_delta_rule.cuh"
#include "kernels/cuda/gated_rms_norm.cuh"
#include "kernels/cuda/gdn_gates.cuh"
#include "kernels/cuda/moe_grouped_gemm.cuh"
#include "kernels/cuda/moe_routing.cuh"
#include "kernels/cuda/packed_dequantize.cuh"
#include "kernels/cuda/packed_linear.cuh"
#include "kernels/cuda/paged_decode_attention.cuh"
#include "kernels/cuda/paged_prefill_attention.cuh"
#include "kernels/cuda/random_uniform.cuh"
#include "kernels/cuda/logit_adjust.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/rope_kv_write.cuh"
#include "kernels/cuda/sampling.cuh"
#include "worker/cuda/device_kernels.h"

namespace tessera::worker {

// Calls fn(T{}) with T the element type of `type`.
template <typename Fn>
absl::Status WithElementType(device::DataType type, Fn&& fn) {
  switch (type) {
    case device::DataType::kBf16: return fn(__nv_bfloat16{});
    case device::DataType::kF16: return fn(__half{});
    case device::DataType::kF32: return fn(float{});
  }
  return absl::InvalidArgumentError("unknown device data type");
}

// Calls fn(std::integral_constant<int, D>{}) for a supported head size D.
template <typename Fn>
absl::Status WithHeadDim(int head_dim, Fn&& fn) {
  switch (head_dim) {
    case 32: return fn(std::integral_constant<int, 32>{});
    case 64: return fn(std::integral_constant<int, 64>{});
    case 80: return fn(std::integral_constant<int, 80>{});
    case 96: return fn(std::integral_constant<int, 96>{});
    case 128: return fn(std::integral_constant<int, 128>{});
    case 256: return fn(std::integral_constant<int, 256>{});
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "no attention kernel for head_dim ", head_dim, " (built: 32, 64, 80, 96, 128, 256)"));
}

template <class Launcher, class ToStatus>
class DeviceKernelsFor final : public DeviceKernels {
 public:
  DeviceKernelsFor(Launcher launcher, ToStatus to_status)
      : launcher_(std::move(launcher)), to_status_(std::move(to_status)) {}

  absl::Status Embedding(DataType type, cuda::GgufFormat format, const int32_t* ids,
                         const void* table, void* out, int num_tokens, int64_t vocab,
                         int hidden) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchEmbedding<Launcher, T>(
          launcher_, format, ids, static_cast<const uint8_t*>(table), static_cast<T*>(out),
          num_tokens, vocab, hidden));
    });
  }

  absl::Status RmsNorm(DataType type, const void* x, const void* weight, void* out, int num_rows,
                       int hidden, float eps) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchRmsNorm<Launcher, T>(
          launcher_, static_cast<const T*>(x), nullptr, static_cast<const T*>(weight),
          static_cast<T*>(out), num_rows, hidden, eps));
    });
  }

  absl::Status AddRmsNorm(DataType type, void* residual, const void* delta, const void* weight,
                          void* out, int num_rows, int hidden, float eps) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchRmsNorm<Launcher, T>(
          launcher_, static_cast<const T*>(delta), static_cast<T*>(residual),
          static_cast<const T*>(weight), static_cast<T*>(out), num_rows, hidden, eps));
    });
  }

  absl::Status RopeKvWrite(DataType type, const RotaryKvWrite& a) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      const cuda::RopeKvWriteRows<T> rows{
          static_cast<const T*>(a.q_in), static_cast<T*>(a.q_out), static_cast<T*>(a.k),
          static_cast<T*>(a.v), a.q_stride, a.kv_stride, static_cast<const T*>(a.q_bias),
          static_cast<const T*>(a.k_bias), static_cast<const T*>(a.v_bias)};
      return to_status_(cuda::LaunchRopeKvWrite<Launcher, T>(
          launcher_, a.style, rows, static_cast<T*>(a.k_pool), static_cast<T*>(a.v_pool),
          a.positions, a.slot_mapping, a.cos_sin, a.max_positions, a.num_tokens, a.num_heads,
          a.num_kv_heads, a.head_dim, a.rope_dim));
    });
  }

  absl::Status SwiGluHalves(DataType type, const void* in, void* out, int num_tokens,
                            int width) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchSwiGluFused<Launcher, T>(
          launcher_, static_cast<const T*>(in), static_cast<T*>(out), num_tokens, width));
    });
  }

  absl::Status SwiGlu(DataType type, const void* gate, const void* up, void* out, int num_tokens,
                      int width) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchSwiGlu<Launcher, T>(
          launcher_, static_cast<const T*>(gate), static_cast<const T*>(up),
          static_cast<T*>(out), num_tokens, width));
    });
  }

  absl::Status AddInPlace(DataType type, void* inout, const void* delta, int64_t count) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchAddInPlace<Launcher, T>(
          launcher_, static_cast<T*>(inout), static_cast<const T*>(delta), count));
    });
  }

  absl::Status AddBias(DataType type, void* inout, const void* bias, int rows,
                       int width) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchAddBias<Launcher, T>(
          launcher_, static_cast<T*>(inout), static_cast<const T*>(bias), rows, width));
    });
  }

  absl::Status GatherRows(DataType type, const void* src, const int32_t* row_indices, void* dst,
                          int num_rows, int width) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchGatherRows<Launcher, T>(
          launcher_, static_cast<const T*>(src), row_indices, static_cast<T*>(dst), num_rows,
          width));
    });
  }


  absl::Status DecodeAttention(DataType type, int head_dim, const cuda::PagedDecodeParams& params,
                               const void* q, const void* k_pool, const void* v_pool,
                               const int32_t* block_tables, const int32_t* context_lens,
                               void* out, float* workspace) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return WithHeadDim(head_dim, [&](auto d) {
        return to_status_(cuda::LaunchPagedDecodeAttention<Launcher, T, decltype(d)::value>(
            launcher_, params, static_cast<const T*>(q), static_cast<const T*>(k_pool),
            static_cast<const T*>(v_pool), block_tables, context_lens, static_cast<T*>(out),
            workspace));
      });
    });
  }

  absl::Status PrefillAttention(DataType type, int head_dim,
                                const cuda::PagedPrefillParams& params, const void* q,
                                const void* k_pool, const void* v_pool,
                                const int32_t* block_tables, const int32_t* query_start_loc,
                                const int32_t* context_lens, void* out) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return WithHeadDim(head_dim, [&](auto d) {
        return to_status_(cuda::LaunchPagedPrefillAttention<Launcher, T, decltype(d)::value>(
            launcher_, params, static_cast<const T*>(q), static_cast<const T*>(k_pool),
            static_cast<const T*>(v_pool), block_tables, query_start_loc, context_lens,
            static_cast<T*>(out)));
      });
    });
  }

  absl::Status BatchInvariantGemm(DataType type, DataType c_type, const void* a, const void* b,
                                  void* c, int m, int n, int k) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      if (c_type == DataType::kF32) return Gemm<T, float>(a, b, c, m, n, k);
      if (c_type != type) {
        return absl::InvalidArgumentError("batch-invariant GEMM: c must be f32 or a's type");
      }
      return Gemm<T, T>(a, b, c, m, n, k);
    });
  }

  absl::Status PackedLinear(DataType type, const void* x, int m, const cuda::PackedLinear& w,
                            void* y, const cuda::PackedStreamWorkspace& stream) override {
    return WithElementType(type, [&](auto t) -> absl::Status {
      using T = decltype(t);
      if constexpr (std::is_same_v<T, float>) {
        return absl::InvalidArgumentError("packed linear: x and y must be bf16 or f16");
      } else {
        return to_status_(cuda::LaunchPackedLinear<Launcher, T>(
            launcher_, static_cast<const T*>(x), m, w, static_cast<T*>(y), stream));
      }
    });
  }

  absl::Status PackedLinearSwiGlu(DataType type, const void* x, int m, const cuda::PackedLinear& w,
                                 void* out, const cuda::PackedStreamWorkspace& stream) override {
    return WithElementType(type, [&](auto t) -> absl::Status {
      using T = decltype(t);
      if constexpr (std::is_same_v<T, float>) {
        return absl::InvalidArgumentError("packed linear: x and out must be bf16 or f16");
      } else {
        return to_status_(cuda::LaunchPackedLinearSwiGlu<Launcher, T>(
            launcher_, static_cast<const T*>(x), m, w, static_cast<T*>(out), stream));
      }
    });
  }

  absl::Status PreparePackedLinear(DataType type) override {
    return WithElementType(type, [&](auto t) -> absl::Status {
      using T = decltype(t);
      if constexpr (std::is_same_v<T, float>) {
        return absl::OkStatus();  // packed weights serve bf16 and f16 only
      } else {
        return to_status_(cuda::AllowPackedLinearSharedMemory<T>(launcher_));
      }
    });
  }

  absl::Status PackedDequantize(DataType type, const cuda::PackedLinear& w, void* out) override {
    return WithElementType(type, [&](auto t) -> absl::Status {
      using T = decltype(t);
      if constexpr (std::is_same_v<T, float>) {
        return absl::InvalidArgumentError("packed dequantize: out must be bf16 or f16");
      } else {
        return to_status_(
            cuda::LaunchPackedDequantize<Launcher, T>(launcher_, w, static_cast<T*>(out)));
      }
    });
  }

  absl::Status DequantizeToBf16(cuda::GgufFormat format, const void* src, void* out, int64_t rows,
                                int64_t cols) override {
    return to_status_(cuda::LaunchDequantizeToBf16<Launcher>(
        launcher_, format, static_cast<const uint8_t*>(src), static_cast<__nv_bfloat16*>(out),
        rows, cols));
  }

  absl::Status CopyColumnGroups(DataType type, const void* src, int64_t src_row, int64_t src_group,
                                void* dst, int64_t dst_row, int64_t dst_group, int rows,
                                int groups, int width) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchCopyColumnGroups<Launcher, T>(
          launcher_, static_cast<const T*>(src), src_row, src_group, static_cast<T*>(dst),
          dst_row, dst_group, rows, groups, width));
    });
  }

  absl::Status SigmoidMul(DataType type, const void* gate, void* inout, int64_t count) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchSigmoidMul<Launcher, T>(
          launcher_, static_cast<const T*>(gate), static_cast<T*>(inout), count));
    });
  }

  absl::Status CausalConv1d(DataType type, const void* x, int64_t x_stride, const void* weight,
                            const cuda::DeviceRecurrentSequence* sequences, int num_seqs,
                            float* states, void* out, int64_t out_stride, int channels,
                            int kernel_size) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchCausalConv1d<Launcher, T>(
          launcher_, static_cast<const T*>(x), x_stride, static_cast<const T*>(weight), sequences,
          num_seqs, states, static_cast<T*>(out), out_stride, channels, kernel_size,
          /*apply_silu=*/true));
    });
  }

  absl::Status GdnGates(DataType type, const void* b, int64_t b_stride, const void* alpha,
                        int64_t alpha_stride, const float* a_coef, const float* dt_bias,
                        int64_t rows, int heads, float* g, float* beta) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchGdnGates<Launcher, T>(
          launcher_, static_cast<const T*>(b), b_stride, static_cast<const T*>(alpha),
          alpha_stride, a_coef, dt_bias, rows, heads, g, beta));
    });
  }

  absl::Status PrepareGatedDeltaRule(DataType type) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::AllowGatedDeltaRuleSharedMemory<T>(launcher_));
    });
  }

  absl::Status GatedDeltaRule(DataType type, const cuda::GdnDeviceParams& params,
                              const GdnRuleInputs& in,
                              const cuda::DeviceRecurrentSequence* sequences, int num_seqs,
                              float* states, void* out) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      const cuda::GdnDeviceInputs<T> inputs{.q = static_cast<const T*>(in.q),
                                            .q_stride = in.q_stride,
                                            .k = static_cast<const T*>(in.k),
                                            .k_stride = in.k_stride,
                                            .v = static_cast<const T*>(in.v),
                                            .v_stride = in.v_stride,
                                            .g = in.g,
                                            .beta = in.beta};
      return to_status_(cuda::LaunchGatedDeltaRule<Launcher, T>(
          launcher_, params, inputs, sequences, num_seqs, states, static_cast<T*>(out),
          cuda::GdnForm::kAuto));
    });
  }

  absl::Status GatedRmsNorm(DataType type, const void* x, const void* z, int64_t z_token_stride,
                            const void* weight, void* y, int64_t num_tokens, int heads, int d,
                            float eps) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchGatedRmsNorm<Launcher, T>(
          launcher_, static_cast<const T*>(x), static_cast<const T*>(z), z_token_stride,
          static_cast<const T*>(weight), static_cast<T*>(y), num_tokens, heads, d, eps));
    });
  }

  absl::Status MoeRouting(float* logits, int num_tokens, int num_experts, int k, bool normalize,
                          int32_t* expert_ids, float* weights,
                          const cuda::MoeGroupsView& groups) override {
    return to_status_(cuda::LaunchMoeRouting(launcher_, logits, num_tokens, num_experts, k,
                                             normalize, expert_ids, weights, groups));
  }

  absl::Status MoeExperts(DataType type, const cuda::MoeGemmGroups& groups,
                          const MoeExpertsInputs& in) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      auto stack = [](const MoeExpertWeights& w) {
        return cuda::ExpertStack<T>{.dense = static_cast<const T*>(w.dense),
                                    .expert_rows = w.expert_rows,
                                    .packed = w.packed.has_value(),
                                    .packed_view = w.packed.value_or(cuda::PackedExperts{})};
      };
      const cuda::MoeExpertsArgs<T, float> args{.x = static_cast<const T*>(in.x),
                                                .gate_w = stack(in.gate_w),
                                                .up_w = stack(in.up_w),
                                                .down_w = stack(in.down_w),
                                                .gate = static_cast<T*>(in.gate),
                                                .up = static_cast<T*>(in.up),
                                                .y = in.y,
                                                .num_tokens = in.num_tokens,
                                                .k = in.k,
                                                .num_experts = in.num_experts,
                                                .hidden = in.hidden,
                                                .ffn = in.ffn};
      return to_status_(cuda::LaunchMoeExperts<Launcher, T, float>(launcher_, groups, args));
    });
  }

  absl::Status MoeCombine(DataType type, const float* y, const float* weights,
                          const int32_t* slot_rows, const void* shared,
                          const float* shared_gate_logits, void* out, int num_tokens, int k,
                          int hidden) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(cuda::LaunchMoeCombine<Launcher, float, T>(
          launcher_, y, weights, slot_rows, static_cast<const T*>(shared), shared_gate_logits,
          static_cast<T*>(out), num_tokens, k, hidden));
    });
  }

  absl::Status ScatterTableDeltas(const cuda::TableDelta* deltas, const int32_t* count,
                                  int32_t* tables, int64_t table_entries) override {
    return to_status_(
        cuda::LaunchScatterTableDeltas(launcher_, deltas, count, tables, table_entries));
  }

  absl::Status GatherTableRows(const int32_t* tables, const int32_t* row_slots, int32_t* out,
                               int num_rows, int stride) override {
    return to_status_(cuda::LaunchGatherRows<Launcher, int32_t>(launcher_, tables, row_slots, out,
                                                                num_rows, stride));
  }

  absl::Status PrepareSampling(int vocab) override {
    const absl::Status status = to_status_(cuda::AllowSamplingSharedMemory(launcher_, vocab));
    if (status.ok()) return status;
    return absl::FailedPreconditionError(absl::StrCat(
        "a vocabulary of ", vocab, " tokens needs ", cuda::SamplingPenaltyBitmapBytes(vocab),
        " bytes of shared memory per block for the device sampler's penalty bitmap, more than "
        "this device allows (", status.message(), ")"));
  }

  absl::Status Sampling(const float* logits, int num_rows, int vocab,
                        const cuda::SamplingRowParams* params,
                        const cuda::SamplingPenalties& penalties,
                        const cuda::SamplingOutputs& outputs, void* workspace) override {
    return to_status_(cuda::LaunchSampling(launcher_, logits, num_rows, vocab, params, penalties,
                                           outputs, workspace));
  }

  absl::Status AdjustLogits(float* logits, int num_rows, int vocab,
                            const cuda::LogitAdjustments& adjust) override {
    if (num_rows == 0) return absl::OkStatus();
    return to_status_(cuda::LaunchLogitAdjust(launcher_, logits, num_rows, vocab, adjust));
  }

  absl::Status RandomUniform(DataType type, void* out, int64_t count,
                             const cuda::RandomUniformParams& params) override {
    return WithElementType(type, [&](auto t) {
      using T = decltype(t);
      return to_status_(
          cuda::LaunchRandomUniform<Launcher, T>(launcher_, static_cast<T*>(out), count, params));
    });
  }

 private:
  template <typename T, typename TC>
  absl::Status Gemm(const void* a, const void* b, void* c, int m, int n, int k) {
    return to_status_(cuda::LaunchBatchInvariantGemm<Launcher, T, T, TC>(
        launcher_, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<TC*>(c), m, n,
        k));
  }

  Launcher launcher_;
  ToStatus to_status_;
};

}  // namespace tessera::worker
