// The `cpu` model runner for llama-family models: the reference every GPU kernel is checked
// against, and the engine CPU users run.
//
// Step and Forward validate the batch, build the step's inputs and run the llama model definition
// (worker/models/llama_model.h) on the cpu ops (cpu_llama_ops.h): all tokens of the batch go
// together through each layer (one matmul per weight with m = total tokens), attention reads the
// paged KV pool through each sequence's block table. Every kernel is batch invariant
// (kernels/cpu/*.h), so a sequence's logits are bit-identical whatever else is in the batch and
// however its prompt was chunked. Step then samples the rows on the host with each slot's
// worker::Sampler (SlotSamplers), so its tokens are exactly what Sampler draws from Forward's
// logits.
//
// Ownership: owns its KV pool [num_layers] x {K, V} [num_blocks, block_size, num_kv_heads,
// head_dim] (f32 or f16, in one huge-page buffer, zeroed and committed at construction), the ops
// (with their grow-only activations), the per-slot samplers and the step's logits buffer;
// borrows the weights and the thread pool.
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
#include "worker/cpu/cpu_llama_ops.h"
#include "worker/cpu/int8_packed_weights.h"
#include "worker/cpu/llama_weights.h"
#include "worker/model_runner.h"
#include "worker/sampler/slot_samplers.h"

namespace tessera::worker {

// The RoPE parameters llama.cpp would pass to ggml_rope_ext for this model: the pairing mode of
// its architecture (config.rope_neox), the scaling read from metadata (freq_scale = 1 / factor;
// YaRN's ext_factor 1, its n_ctx_orig and betas), llama.cpp's llama_context adjustment of
// attn_factor, and the model's rope_freqs (may be empty).
// Precondition: freq_factors is empty or holds config.rope_dim / 2 values.
kernels::cpu::RopeParams RopeParamsForModel(const model::ModelConfig& config,
                                            std::span<const float> freq_factors);

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
};

class CpuLlamaRunner final : public ModelRunner {
 public:
  // Preconditions: weights match config; options.block_size >= 1, num_kv_blocks >= 2,
  // max_num_seqs >= 1.
  CpuLlamaRunner(const model::ModelConfig& config, const LlamaWeights* weights,
                 kernels::cpu::ThreadPool* pool, const CpuRunnerOptions& options);

  const model::ModelConfig& config() const override { return config_; }
  KvPoolInfo kv_pool() const override;
  // Bytes of one KV block: K and V of every layer, [block_size, num_kv_heads, head_dim] of dtype.
  static int64_t KvBlockBytes(const model::ModelConfig& config, int block_size,
                              kernels::cpu::KvDtype dtype);
  std::string backend_name() const override { return "cpu"; }
  int max_num_seqs() const override { return samplers_.max_num_seqs(); }
  kernels::cpu::Isa isa() const { return ops_.isa(); }
  // The int8-packed weights (null unless activations are kInt8): every projection is packed.
  const Int8PackedWeights* int8_weights() const { return int8_.get(); }
  // The cos/sin table every layer's RoPE reads (for tests and diagnostics).
  const kernels::cpu::RopeTable& rope_table() const { return rope_; }

  void BeginSequence(int slot, const SamplingParams& params, std::span<const int32_t> prompt,
                     std::span<const int32_t> generated) override;
  void EndSequence(int slot) override;
  // StepRunInfo: launch_seconds = Step entry -> end of the forward pass (the compute is host
  // time), device_seconds = -1, no graphs.
  absl::Status Step(std::span<const SequenceWork> batch, StepSamples* samples) override;
  absl::Status Forward(std::span<const SequenceWork> batch, StepLogits* logits) override;

 private:
  // Carves the K and V pools of every layer out of kv_memory_.
  void AllocateKvPools();
  absl::Status Validate(std::span<const SequenceWork> batch) const;
  // Builds this step's token ids, positions, slots and attention sequences.
  void PrepareInputs(std::span<const SequenceWork> batch, StepLogits* logits);

  model::ModelConfig config_;
  const LlamaWeights* weights_;
  std::unique_ptr<Int8PackedWeights> int8_;  // set for MatmulActivations::kInt8
  kernels::cpu::RopeTable rope_;
  kernels::cpu::KvDtype kv_dtype_;
  util::HugePageBuffer kv_memory_;  // every pool below, in huge pages
  CpuKvPools kv_;
  CpuLlamaOps ops_;
  SlotSamplers samplers_;
  StepLogits step_logits_;  // Step's forward output, reused every step

  // Per-step inputs, rebuilt by PrepareInputs.
  std::vector<int32_t> token_ids_;                       // [num_tokens]
  std::vector<int32_t> positions_;                       // [num_tokens]
  std::vector<int64_t> slots_;                           // [num_tokens]
  std::vector<kernels::cpu::AttentionSequence> attention_sequences_;
};

}  // namespace tessera::worker
