// The `cpu` backend of the llama model definition (worker/models/llama_model.h): each op is one
// call into kernels/cpu on f32 activations, parallel over the runner's thread pool. Every
// kernel is batch invariant, so a sequence's results are bit-identical whatever else is in the
// step. Matmuls use the int8-activation kernels when the runner packed the weights for them
// (MatmulActivations::kInt8; then every projection is packed, never a silent f32 fallback), the
// exact f32 ones otherwise.
//
// Ownership: owns the activation buffers (grow-only); borrows the weights, the packed weights,
// the KV pools, the RoPE table and the step inputs from its runner (CpuLlamaRunner), which must
// outlive it. Threading: the runner's step thread only.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "common/model/model_config.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/float16.h"
#include "kernels/cpu/int8_matmul.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/cpu/int8_packed_weights.h"
#include "worker/cpu/llama_weights.h"
#include "worker/models/llama_model.h"

namespace tessera::worker {

// A matmul weight as the cpu ops read it: the GGUF view, and its int8-packed copy (null data
// unless the runner packed weights).
struct CpuMatmulWeight {
  const kernels::cpu::WeightView* exact = nullptr;
  const kernels::cpu::Int8WeightView* packed = nullptr;
};

// One layer's weights with the member names the model definition uses.
struct CpuLlamaLayer {
  std::span<const float> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
  CpuMatmulWeight wq, wk, wv, wo, w_gate, w_up, w_down;
};

// The paged KV pools of every layer, f32 or f16 (one of the two vectors is empty).
struct CpuKvPools {
  kernels::cpu::PagedKvShape shape;
  std::vector<std::span<float>> k, v;                           // [num_layers]
  std::vector<std::span<kernels::cpu::Float16>> k_half, v_half;  // [num_layers]
};

// What one step computes over: [num_tokens] token ids, positions and slots, the sequences'
// attention spans, and which sequence each logits row comes from.
struct CpuStepInputs {
  std::span<const int32_t> token_ids;
  std::span<const int32_t> positions;
  std::span<const int64_t> slots;
  std::span<const kernels::cpu::AttentionSequence> sequences;
  std::span<const int32_t> logits_sequences;  // [rows] index into sequences
  std::span<float> logits;                    // [rows, vocab], the kLogits activation
};

class CpuLlamaOps {
 public:
  using Act = LlamaActivation;
  struct Projection {
    const CpuMatmulWeight& weight;
    Act out;
  };

  // Preconditions: all pointers outlive the ops; packed is null unless activations are int8.
  CpuLlamaOps(const model::ModelConfig& config, const LlamaWeights* weights,
              const Int8PackedWeights* packed, const CpuKvPools* kv,
              const kernels::cpu::RopeTable* rope, kernels::cpu::ThreadPool* pool,
              kernels::cpu::Isa isa);

  // Sizes the activations for `inputs` (borrowed until the next BeginStep).
  void BeginStep(const CpuStepInputs& inputs);
  kernels::cpu::Isa isa() const { return isa_; }

  // The ops of llama_model.h.
  const CpuLlamaLayer& layer(int l) const { return layers_[l]; }
  std::span<const float> output_norm() const { return weights_->output_norm; }
  const CpuMatmulWeight& output() const { return output_; }
  static bool HasBias(std::span<const float> bias) { return !bias.empty(); }
  static bool HasNorm(std::span<const float> norm) { return !norm.empty(); }
  void Embed(Act out);
  void RmsNorm(Act in, std::span<const float> weight, Act out, int groups);
  void Project(Act in, std::initializer_list<Projection> outputs);
  void AddBias(std::span<const float> bias, Act inout);
  void Rope(Act inout, int num_heads);
  void Attend(int layer, Act q, Act k, Act v, Act out);
  void SwiGlu(Act gate, Act up, Act out);
  void Add(Act inout, Act delta);
  void GatherLastRows(Act in, Act out);

 private:
  int64_t Rows(Act act) const;
  int64_t Width(Act act) const;
  std::span<float> Span(Act act);  // the activation's rows, exactly

  model::ModelConfig config_;
  const LlamaWeights* weights_;
  const Int8PackedWeights* packed_;
  const CpuKvPools* kv_;
  const kernels::cpu::RopeTable* rope_;
  kernels::cpu::ThreadPool* pool_;
  kernels::cpu::Isa isa_;
  std::vector<CpuLlamaLayer> layers_;
  CpuMatmulWeight output_;
  CpuStepInputs inputs_;
  std::vector<kernels::cpu::AlignedVector<float>> buffers_;  // one per Act but kLogits
};

}  // namespace tessera::worker
