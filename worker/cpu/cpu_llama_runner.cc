#include "worker/cpu/cpu_llama_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"
#include "worker/models/llama_model.h"
#include "worker/step_batch_validation.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;
using Clock = std::chrono::steady_clock;

}  // namespace

cpu::RopeParams RopeParamsForModel(const model::ModelConfig& config,
                                   std::span<const float> freq_factors) {
  TESSERA_CHECK(freq_factors.empty() ||
                    static_cast<int>(freq_factors.size()) == config.rope_dim / 2,
                "RopeParamsForModel: freq_factors must hold rope_dim / 2 values");
  const model::RopeScaling& scaling = config.rope_scaling;
  cpu::RopeParams p{.rope_dim = config.rope_dim,
                    .mode = config.rope_neox ? cpu::RopeMode::kNeox : cpu::RopeMode::kNormal,
                    .theta_base = static_cast<float>(config.rope_theta),
                    .original_context_length = scaling.original_context_length,
                    .beta_fast = static_cast<float>(scaling.yarn_beta_fast),
                    .beta_slow = static_cast<float>(scaling.yarn_beta_slow),
                    .freq_factors = {freq_factors.begin(), freq_factors.end()}};
  // llama.cpp keeps the factor as f32 and inverts it in f32 (rope_freq_scale_train).
  if (scaling.type != model::RopeScalingType::kNone) {
    p.freq_scale = 1.0f / static_cast<float>(scaling.factor);
  }
  // llama_context: ext_factor defaults to 1 for YaRN, 0 otherwise. With YaRN it sets
  // attn_factor = get_mscale(factor) / (1 + 0.1 ln factor) — ~1, cancelling the mscale that
  // ggml's rope_yarn applies on top (llama.cpp PR 17945) — which we evaluate the same way in f32
  // so the product matches to the bit; then both multiply by rope.scaling.attn_factor.
  p.attn_factor = 1.0f;
  if (scaling.type == model::RopeScalingType::kYarn) {
    p.ext_factor = 1.0f;
    const float factor = 1.0f / p.freq_scale;
    p.attn_factor = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
    p.attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
  }
  p.attn_factor *= static_cast<float>(scaling.attn_factor);
  return p;
}

absl::StatusOr<MatmulActivations> ParseMatmulActivations(std::string_view name) {
  if (name == "f32") return MatmulActivations::kF32;
  if (name == "int8") return MatmulActivations::kInt8;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown matmul activations '", util::ToAbsl(name), "' (expected f32 or int8)"));
}

std::string_view MatmulActivationsName(MatmulActivations activations) {
  return activations == MatmulActivations::kInt8 ? "int8" : "f32";
}

absl::StatusOr<cpu::KvDtype> ParseKvDtype(std::string_view name) {
  if (name == "f32") return cpu::KvDtype::kF32;
  if (name == "f16") return cpu::KvDtype::kF16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV cache dtype '", util::ToAbsl(name), "' (expected f32 or f16)"));
}

std::string_view KvDtypeName(cpu::KvDtype dtype) {
  return dtype == cpu::KvDtype::kF16 ? "f16" : "f32";
}

CpuLlamaRunner::CpuLlamaRunner(const model::ModelConfig& config, const LlamaWeights* weights,
                               cpu::ThreadPool* pool, const CpuRunnerOptions& options)
    : config_(config),
      weights_(weights),
      int8_(options.activations == MatmulActivations::kInt8
                ? std::make_unique<Int8PackedWeights>(*weights)
                : nullptr),
      rope_(RopeParamsForModel(config, weights->rope_freqs), config.context_length),
      kv_dtype_(options.kv_dtype),
      kv_{.shape = {.num_blocks = options.num_kv_blocks,
                    .block_size = options.block_size,
                    .num_kv_heads = config.num_kv_heads,
                    .head_dim = config.head_dim},
          .k = {}, .v = {}, .k_half = {}, .v_half = {}},
      ops_(config, weights, int8_.get(), &kv_, &rope_, pool, options.isa),
      samplers_(options.max_num_seqs, config.vocab_size) {
  TESSERA_CHECK(cpu::IsaSupported(options.isa), "this CPU cannot run the requested ISA");
  TESSERA_CHECK(options.block_size >= 1, "block_size must be >= 1");
  TESSERA_CHECK(options.num_kv_blocks >= 2, "need the null block and at least one more");
  TESSERA_CHECK(static_cast<int>(weights->layers.size()) == config.num_layers,
                "weights and config disagree on the layer count");
  AllocateKvPools();
}

void CpuLlamaRunner::AllocateKvPools() {
  const int64_t elements = kv_.shape.PoolElements();
  const size_t pool_bytes = static_cast<size_t>(elements * cpu::KvDtypeBytes(kv_dtype_));
  absl::StatusOr<util::HugePageBuffer> memory =
      util::HugePageBuffer::Allocate(2 * config_.num_layers * pool_bytes);
  TESSERA_CHECK(memory.ok(), "CpuLlamaRunner: cannot allocate the KV pools");
  kv_memory_ = *std::move(memory);
  std::memset(kv_memory_.data(), 0, kv_memory_.size());  // commit the memory now, not mid-serving
  for (int p = 0; p < 2 * config_.num_layers; ++p) {
    uint8_t* base = kv_memory_.data() + p * pool_bytes;
    if (kv_dtype_ == cpu::KvDtype::kF16) {
      auto& pools = p % 2 == 0 ? kv_.k_half : kv_.v_half;
      pools.emplace_back(reinterpret_cast<cpu::Float16*>(base), elements);
    } else {
      auto& pools = p % 2 == 0 ? kv_.k : kv_.v;
      pools.emplace_back(reinterpret_cast<float*>(base), elements);
    }
  }
}

int64_t CpuLlamaRunner::KvBlockBytes(const model::ModelConfig& config, int block_size,
                                     cpu::KvDtype dtype) {
  return int64_t{2} * config.num_layers * block_size * config.num_kv_heads * config.head_dim *
         cpu::KvDtypeBytes(dtype);
}

KvPoolInfo CpuLlamaRunner::kv_pool() const {
  return {.block_size = kv_.shape.block_size,
          .num_blocks = kv_.shape.num_blocks,
          .bytes = kv_.shape.num_blocks * KvBlockBytes(config_, kv_.shape.block_size, kv_dtype_)};
}

absl::Status CpuLlamaRunner::Validate(std::span<const SequenceWork> batch) const {
  return ValidateStepBatch(
      batch, config_,
      {.block_size = kv_.shape.block_size, .num_blocks = kv_.shape.num_blocks}, nullptr);
}

void CpuLlamaRunner::BeginSequence(int slot, const SamplingParams& params,
                                   std::span<const int32_t> prompt,
                                   std::span<const int32_t> generated) {
  samplers_.Begin(slot, params, prompt, generated);
}

void CpuLlamaRunner::EndSequence(int slot) { samplers_.End(slot); }

absl::Status CpuLlamaRunner::Step(std::span<const SequenceWork> batch, StepSamples* samples) {
  const Clock::time_point start = Clock::now();
  samples->sequence_index.clear();
  samples->rows.clear();
  samples->info = StepRunInfo{};
  if (absl::Status status = Validate(batch); !status.ok()) return status;
  if (absl::Status status = samplers_.CheckRows(batch); !status.ok()) return status;
  PrepareInputs(batch, &step_logits_);
  LlamaForward(ops_, config_);
  samples->info.launch_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  samples->info.device_seconds = -1;  // no device: the compute above is host time
  samplers_.SampleRows(batch, step_logits_, samples);
  return absl::OkStatus();
}

absl::Status CpuLlamaRunner::Forward(std::span<const SequenceWork> batch, StepLogits* logits) {
  if (absl::Status status = Validate(batch); !status.ok()) return status;
  PrepareInputs(batch, logits);
  LlamaForward(ops_, config_);
  return absl::OkStatus();
}

void CpuLlamaRunner::PrepareInputs(std::span<const SequenceWork> batch, StepLogits* logits) {
  token_ids_.clear();
  positions_.clear();
  attention_sequences_.clear();
  logits->vocab_size = config_.vocab_size;
  logits->sequence_index.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceWork& s = batch[i];
    attention_sequences_.push_back({.query_begin = static_cast<int64_t>(token_ids_.size()),
                                    .num_query_tokens = static_cast<int32_t>(s.tokens.size()),
                                    .start_pos = s.start_pos,
                                    .block_table = s.block_table});
    token_ids_.insert(token_ids_.end(), s.tokens.begin(), s.tokens.end());
    for (size_t t = 0; t < s.tokens.size(); ++t) positions_.push_back(s.start_pos + t);
    if (s.needs_logits) logits->sequence_index.push_back(static_cast<int32_t>(i));
  }
  slots_.resize(token_ids_.size());
  for (const cpu::AttentionSequence& s : attention_sequences_) {
    cpu::ComputeSlotMapping(s.block_table, kv_.shape.block_size, s.start_pos,
                            std::span<int64_t>(slots_).subspan(s.query_begin, s.num_query_tokens));
  }
  logits->values.resize(logits->sequence_index.size() * config_.vocab_size);
  ops_.BeginStep({.token_ids = token_ids_,
                  .positions = positions_,
                  .slots = slots_,
                  .sequences = attention_sequences_,
                  .logits_sequences = logits->sequence_index,
                  .logits = logits->values});
}

}  // namespace tessera::worker
