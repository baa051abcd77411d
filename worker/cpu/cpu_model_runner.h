// The `cpu` model runner for every model definition (worker/models/model_plan.h): the reference
// every GPU kernel is checked against, and the engine CPU users run.
//
// Step and Forward validate the batch, build the step's inputs and run the model's forward
// function on the cpu ops (cpu_model_ops.h): all tokens of the batch go together through each
// layer (one matmul per weight with m = total tokens), attention reads the paged KV pool through
// each sequence's block table, linear (GDN) layers advance the recurrent state of the sequence's
// slot (cleared by BeginSequence and EndSequence, so a preempted sequence is recomputed from
// zero; carried across the chunks of a prompt). Every kernel is batch invariant
// (kernels/cpu/*.h), so a sequence's logits are bit-identical whatever else is in the batch and
// however its prompt was chunked. Step then samples the rows on the host with each slot's
// worker::Sampler (SlotSamplers), so its tokens are exactly what Sampler draws from Forward's
// logits.
//
// Ownership: owns its KV pool [attention layers] x {K, V} [num_blocks, block_size, num_kv_heads,
// head_dim] (f32 or f16, in one huge-page buffer, zeroed and committed at construction), the
// recurrent state [linear layers] x [max_num_seqs] (committed slot by slot as sequences start),
// the ops (with their grow-only activations), the per-slot samplers and the step's logits
// buffer; borrows the plan, the weights and the thread pool.
// Threading: called from one thread at a time (the thread that drives the pool).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "common/util/huge_page_buffer.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/cpu/cpu_model_ops.h"
#include "worker/cpu/int8_packed_weights.h"
#include "worker/model_runner.h"
#include "worker/models/host_model_weights.h"
#include "worker/models/model_plan.h"
#include "worker/sampler/slot_samplers.h"

namespace tessera::worker {

// What the matmuls do with activations. kF32 (default): exact, f32 activations (matmul.h), the
// path the oracle and bit-exactness gates hold for. kInt8: activations quantized to int8 per
// 32-element block for integer dot products (int8_matmul.h) — lossy (KL bound in
// docs/perf/cpu.md), still deterministic and batch invariant, faster batched decode.
enum class MatmulActivations { kF32, kInt8 };

// "f32" / "int8"; INVALID_ARGUMENT naming the accepted values otherwise.
absl::StatusOr<MatmulActivations> ParseMatmulActivations(std::string_view name);
std::string_view MatmulActivationsName(MatmulActivations activations);

// "f32" / "f16" (the KV pools' element type); INVALID_ARGUMENT naming the accepted values
// otherwise.
absl::StatusOr<kernels::cpu::KvDtype> ParseKvDtype(std::string_view name);
std::string_view KvDtypeName(kernels::cpu::KvDtype dtype);

struct CpuRunnerOptions {
  int block_size = 16;
  int64_t num_kv_blocks = 0;  // including the null block 0; must be >= 2
  MatmulActivations activations = MatmulActivations::kF32;
  // kF16 halves the KV pool's memory and the bandwidth decode attention needs; K/V values are
  // rounded to f16 when written (lossy: KL bound in docs/perf/cpu.md). kF32 is exact.
  kernels::cpu::KvDtype kv_dtype = kernels::cpu::KvDtype::kF32;
  // The kernel copies every SIMD kernel of the runner uses (kernels/cpu/isa.h); must be supported
  // by the running CPU. Tests force each level to hold all of them to the oracle.
  kernels::cpu::Isa isa = kernels::cpu::BestIsa();
  // Sampling slots [0, max_num_seqs) (BeginSequence); >= 1.
  int max_num_seqs = 256;
  // Memory for recurrent-state snapshots (hybrid prefix caching): as many whole snapshots as fit,
  // at most MaxStateSnapshots(max_num_seqs); none for models without linear layers. Committed
  // as used.
  int64_t state_snapshot_bytes = 0;
};


class CpuModelRunner final : public ModelRunner {
 public:
  // Preconditions: weights were bound from plan's declaration for config; options.block_size >= 1,
  // num_kv_blocks >= 2, max_num_seqs >= 1.
  CpuModelRunner(const model::ModelConfig& config, const ModelPlan* plan,
                 const HostModelWeights* weights, kernels::cpu::ThreadPool* pool,
                 const CpuRunnerOptions& options);

  const model::ModelConfig& config() const override { return config_; }
  KvPoolInfo kv_pool() const override;
  // Bytes of one KV block: K and V of every attention layer, [block_size, num_kv_heads, head_dim]
  // of dtype.
  static int64_t KvBlockBytes(const ModelPlan& plan, const model::ModelConfig& config,
                              int block_size, kernels::cpu::KvDtype dtype);
  int state_snapshot_slots() const override { return num_snapshots_; }
  void SaveStateSnapshot(int slot, int snapshot) override;
  void RestoreStateSnapshot(int snapshot, int slot) override;
  ModelLayerInfo layer_info() const override {
    return {.attention_layers = plan_->num_attention_layers,
            .linear_layers = plan_->num_linear_layers,
            .state_bytes_per_sequence = state_floats_per_slot_ * static_cast<int64_t>(sizeof(float))};
  }
  std::string backend_name() const override { return "cpu"; }
  int max_num_seqs() const override { return samplers_.max_num_seqs(); }
  kernels::cpu::Isa isa() const { return ops_.isa(); }
  // The int8-packed weights (null unless activations are kInt8): every projection is packed.
  const Int8PackedWeights* int8_weights() const { return int8_.get(); }
  // The cos/sin table every layer's RoPE reads (for tests and diagnostics).
  const kernels::cpu::RopeTable& rope_table() const { return rope_; }

  void BeginSequence(int slot, const sampling::SamplingParams& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated) override;
  void EndSequence(int slot) override;
  // StepRunInfo: launch_seconds = Step entry -> end of the forward pass (the compute is host
  // time), device_seconds = -1, no graphs.
  // A host runner: the pending masks are filled after the forward pass (no device to overlap).
  absl::Status Step(std::span<const SequenceWork> batch, StepSamples* samples,
                    const FillPendingMasks& fill_pending_masks = {}) override;
  absl::Status Forward(std::span<const SequenceWork> batch, StepLogits* logits) override;

 private:
  // Carves the K and V pools of every attention layer out of kv_memory_.
  void AllocateKvPools();
  // Carves every linear layer's per-slot state out of state_memory_ (committed by ClearState),
  // and reserves the snapshot pool.
  void AllocateRecurrentState(int64_t snapshot_bytes);
  void ClearState(int slot);
  // Forward leaves no trace: the states of the batch's slots are saved before and restored after.
  void SaveStates(std::span<const SequenceWork> batch);
  void RestoreStates(std::span<const SequenceWork> batch);
  absl::Status Validate(std::span<const SequenceWork> batch) const;
  // Builds this step's token ids, positions, KV slots, attention and recurrent sequences.
  void PrepareInputs(std::span<const SequenceWork> batch, StepLogits* logits);

  model::ModelConfig config_;
  const ModelPlan* plan_;
  const HostModelWeights* weights_;
  std::unique_ptr<Int8PackedWeights> int8_;  // set for MatmulActivations::kInt8
  kernels::cpu::RopeTable rope_;
  kernels::cpu::KvDtype kv_dtype_;
  util::HugePageBuffer kv_memory_;  // every pool below, in huge pages
  CpuKvPools kv_;
  util::HugePageBuffer state_memory_;  // every recurrent state below
  CpuRecurrentState state_;
  int64_t conv_floats_per_slot_ = 0;   // per linear layer
  int64_t ssm_floats_per_slot_ = 0;    // per linear layer
  int64_t state_floats_per_slot_ = 0;  // all linear layers
  std::vector<float> saved_states_;    // Forward's copies
  util::HugePageBuffer snapshot_memory_;  // [num_snapshots_, state_floats_per_slot_]
  int num_snapshots_ = 0;
  CpuModelOps ops_;
  SlotSamplers samplers_;
  StepLogits step_logits_;  // Step's forward output, reused every step

  // Per-step inputs, rebuilt by PrepareInputs.
  std::vector<int32_t> token_ids_;                       // [num_tokens]
  std::vector<int32_t> positions_;                       // [num_tokens]
  std::vector<int64_t> slots_;                           // [num_tokens]
  std::vector<kernels::cpu::AttentionSequence> attention_sequences_;
  std::vector<kernels::cpu::RecurrentSequence> recurrent_sequences_;
};

}  // namespace tessera::worker
