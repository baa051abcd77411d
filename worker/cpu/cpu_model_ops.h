// The `cpu` backend of the model definitions (worker/models/model_ops.h): each op is one call
// into kernels/cpu on f32 activations, parallel over the runner's thread pool. Every kernel is
// batch invariant, so a sequence's results are bit-identical whatever else is in the step.
// Matmuls use the int8-activation kernels when the runner packed the weights for them
// (MatmulActivations::kInt8; then every projection is packed, never a silent f32 fallback), the
// exact f32 ones otherwise. LinearAttend runs on per-(linear layer, slot) recurrent state
// (CpuRecurrentState), MoeFfn on a workspace owned here.
//
// Ownership: owns the activation buffers (grow-only) and the MoE workspace; borrows the plan,
// weights, packed weights, KV pools, recurrent state, RoPE table and step inputs from its runner
// (CpuModelRunner), which must outlive it. Threading: the runner's step thread only.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "common/model/model_config.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/float16.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/moe_ffn.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/recurrent_sequence.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/cpu/int8_packed_weights.h"
#include "worker/models/host_model_weights.h"
#include "worker/models/model_ops.h"
#include "worker/models/model_plan.h"

namespace tessera::worker {

// The paged KV pools of every attention layer, f32 or f16 (one of the two vectors is empty).
struct CpuKvPools {
  kernels::cpu::PagedKvShape shape;
  std::vector<std::span<float>> k, v;                           // [attention layers]
  std::vector<std::span<kernels::cpu::Float16>> k_half, v_half;  // [attention layers]
};

// The recurrent state of every linear (GDN) layer, per slot: conv [num_slots, K-1, channels]
// and delta-rule [num_slots, v_heads, d_k, d_v] (f32; layouts of kernels/cpu/causal_conv1d.h and
// gated_delta_rule.h).
struct CpuRecurrentState {
  std::vector<std::span<float>> conv, ssm;  // [linear layers]
};

// What one step computes over: [num_tokens] token ids, positions and KV slots, the sequences'
// attention spans and recurrent-state slots, and which sequence each logits row comes from.
struct CpuStepInputs {
  std::span<const int32_t> token_ids;
  std::span<const int32_t> positions;
  std::span<const int64_t> slots;
  std::span<const kernels::cpu::AttentionSequence> sequences;
  std::span<const kernels::cpu::RecurrentSequence> recurrent;  // empty without linear layers
  std::span<const int32_t> logits_sequences;  // [rows] index into sequences
  std::span<float> logits;                    // [rows, vocab], the plan's logits activation
};

class CpuModelOps {
 public:
  // Preconditions: all pointers outlive the ops; packed is null unless activations are int8.
  CpuModelOps(const model::ModelConfig& config, const ModelPlan* plan,
              const HostModelWeights* weights, const Int8PackedWeights* packed,
              const CpuKvPools* kv, const CpuRecurrentState* state,
              const kernels::cpu::RopeTable* rope, kernels::cpu::ThreadPool* pool,
              kernels::cpu::Isa isa);

  // Sizes the activations for `inputs` (borrowed until the next BeginStep).
  void BeginStep(const CpuStepInputs& inputs);
  kernels::cpu::Isa isa() const { return isa_; }

  // The ops of model_ops.h.
  bool Has(WeightId id) const { return id != kNoWeight && (*weights_)[id].present; }
  void Embed(WeightId table, ActId out);
  void RmsNorm(ActId in, WeightId weight, ActId out, int groups);
  void Project(ActId in, std::initializer_list<Projection> outputs);
  void AddBias(WeightId bias, ActId inout);
  void AddRmsNorm(ActId inout, ActId delta, WeightId weight, ActId out);
  void RotaryAttend(int kv_layer, ActId q, ActId k, ActId v, ActId out);
  void RotaryAttendQkv(int kv_layer, ActId qkv, const QkvBiases& biases, ActId q, ActId k,
                       ActId v, ActId out);
  void ProjectSwiGlu(ActId in, WeightId weight, ActId gate_up, ActId out);
  void SplitHeads(ActId in, int groups, std::initializer_list<SplitPart> parts);
  void SigmoidMul(ActId gate, ActId inout);
  void SwiGlu(ActId gate, ActId up, ActId out);
  void Add(ActId inout, ActId delta);
  void GatherLastRows(ActId in, ActId out);
  void LinearAttend(int linear_layer, const GdnOpWeights& weights, const GdnOpActs& acts);
  void MoeFfn(ActId in, const MoeOpWeights& weights, ActId out);

 private:
  void Rope(ActId inout, int num_heads);
  int64_t Rows(ActId act) const;
  int64_t Width(ActId act) const { return plan_->activations[act].width; }
  std::span<float> Span(ActId act);  // the activation's rows, exactly
  std::span<const float> Values(WeightId id) const { return (*weights_)[id].values; }
  const kernels::cpu::WeightView& Matrix(WeightId id) const { return (*weights_)[id].matrix; }

  model::ModelConfig config_;
  const ModelPlan* plan_;
  const HostModelWeights* weights_;
  const Int8PackedWeights* packed_;
  const CpuKvPools* kv_;
  const CpuRecurrentState* state_;
  const kernels::cpu::RopeTable* rope_;
  kernels::cpu::ThreadPool* pool_;
  kernels::cpu::Isa isa_;
  CpuStepInputs inputs_;
  std::vector<kernels::cpu::AlignedVector<float>> buffers_;  // by ActId; the logits are external
  kernels::cpu::MoeFfnWorkspace moe_workspace_;
};

}  // namespace tessera::worker
