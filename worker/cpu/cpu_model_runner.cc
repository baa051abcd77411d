#include "worker/cpu/cpu_model_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"
#include "kernels/cpu/causal_conv1d.h"
#include "kernels/cpu/gated_delta_rule.h"
#include "worker/models/rope_params.h"
#include "worker/step_batch_validation.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;
using Clock = std::chrono::steady_clock;

}  // namespace

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

CpuModelRunner::CpuModelRunner(const model::ModelConfig& config, const ModelPlan* plan,
                               const HostModelWeights* weights, cpu::ThreadPool* pool,
                               const CpuRunnerOptions& options)
    : config_(config),
      plan_(plan),
      weights_(weights),
      int8_(options.activations == MatmulActivations::kInt8
                ? std::make_unique<Int8PackedWeights>(plan->weights, *weights)
                : nullptr),
      rope_(RopeParamsForModel(config, (*weights)[plan->head.rope_freqs].values),
            config.context_length),
      kv_dtype_(options.kv_dtype),
      kv_{.shape = {.num_blocks = options.num_kv_blocks,
                    .block_size = options.block_size,
                    .num_kv_heads = config.num_kv_heads,
                    .head_dim = config.head_dim},
          .k = {}, .v = {}, .k_half = {}, .v_half = {}},
      ops_(config, plan, weights, int8_.get(), &kv_, &state_, &rope_, pool, options.isa),
      samplers_(options.max_num_seqs, config.vocab_size) {
  TESSERA_CHECK(cpu::IsaSupported(options.isa), "this CPU cannot run the requested ISA");
  TESSERA_CHECK(options.block_size >= 1, "block_size must be >= 1");
  TESSERA_CHECK(options.num_kv_blocks >= 2, "need the null block and at least one more");
  TESSERA_CHECK(static_cast<int>(weights->tensors.size()) == plan->weights.size(),
                "weights were not bound from the plan's declaration");
  AllocateKvPools();
  AllocateRecurrentState(options.state_snapshot_bytes);
}

void CpuModelRunner::AllocateKvPools() {
  const int64_t elements = kv_.shape.PoolElements();
  const size_t pool_bytes = static_cast<size_t>(elements * cpu::KvDtypeBytes(kv_dtype_));
  absl::StatusOr<util::HugePageBuffer> memory =
      util::HugePageBuffer::Allocate(2 * plan_->num_attention_layers * pool_bytes);
  TESSERA_CHECK(memory.ok(), "CpuModelRunner: cannot allocate the KV pools");
  kv_memory_ = *std::move(memory);
  std::memset(kv_memory_.data(), 0, kv_memory_.size());  // commit the memory now, not mid-serving
  for (int p = 0; p < 2 * plan_->num_attention_layers; ++p) {
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

int64_t CpuModelRunner::KvBlockBytes(const ModelPlan& plan, const model::ModelConfig& config,
                                     int block_size, cpu::KvDtype dtype) {
  return int64_t{2} * plan.num_attention_layers * block_size * config.num_kv_heads *
         config.head_dim * cpu::KvDtypeBytes(dtype);
}

namespace {

// Visits each (slot's conv state, slot's delta-rule state) of the batch, in a fixed order.
template <typename Fn>
void ForEachSlotState(const CpuRecurrentState& state, std::span<const SequenceWork> batch,
                      int64_t conv_floats, int64_t ssm_floats, Fn fn) {
  for (const SequenceWork& s : batch) {
    for (size_t l = 0; l < state.conv.size(); ++l) {
      fn(state.conv[l].subspan(s.slot * conv_floats, conv_floats));
      fn(state.ssm[l].subspan(s.slot * ssm_floats, ssm_floats));
    }
  }
}

}  // namespace

void CpuModelRunner::AllocateRecurrentState(int64_t snapshot_bytes) {
  if (plan_->num_linear_layers == 0) return;
  const model::GdnDims& d = config_.hybrid->gdn;
  conv_floats_per_slot_ = int64_t{d.conv_kernel - 1} * model::GdnConvChannels(d);
  ssm_floats_per_slot_ = int64_t{d.num_v_heads} * d.head_k_dim * d.head_v_dim;
  state_floats_per_slot_ = plan_->num_linear_layers * (conv_floats_per_slot_ + ssm_floats_per_slot_);
  const int64_t slots = samplers_.max_num_seqs();
  absl::StatusOr<util::HugePageBuffer> memory =
      util::HugePageBuffer::Allocate(static_cast<size_t>(slots * state_floats_per_slot_) * sizeof(float));
  TESSERA_CHECK(memory.ok(), "CpuModelRunner: cannot allocate the recurrent state");
  state_memory_ = *std::move(memory);
  float* base = reinterpret_cast<float*>(state_memory_.data());
  for (int l = 0; l < plan_->num_linear_layers; ++l) {
    state_.conv.emplace_back(base, slots * conv_floats_per_slot_);
    base += slots * conv_floats_per_slot_;
    state_.ssm.emplace_back(base, slots * ssm_floats_per_slot_);
    base += slots * ssm_floats_per_slot_;
  }
  const int64_t snapshot_floats = state_floats_per_slot_;
  num_snapshots_ = static_cast<int>(std::min<int64_t>(
      snapshot_bytes / (snapshot_floats * static_cast<int64_t>(sizeof(float))),
      MaxStateSnapshots(samplers_.max_num_seqs())));
  if (num_snapshots_ == 0) return;
  absl::StatusOr<util::HugePageBuffer> snapshots = util::HugePageBuffer::Allocate(
      static_cast<size_t>(num_snapshots_ * snapshot_floats) * sizeof(float));
  TESSERA_CHECK(snapshots.ok(), "CpuModelRunner: cannot reserve the state snapshot pool");
  snapshot_memory_ = *std::move(snapshots);
}

void CpuModelRunner::SaveStateSnapshot(int slot, int snapshot) {
  TESSERA_CHECK(snapshot >= 1 && snapshot <= num_snapshots_, "SaveStateSnapshot: no such snapshot");
  TESSERA_CHECK(slot >= 0 && slot < samplers_.max_num_seqs(), "SaveStateSnapshot: no such slot");
  float* out = reinterpret_cast<float*>(snapshot_memory_.data()) +
               (snapshot - 1) * state_floats_per_slot_;
  const SequenceWork one{.tokens = {}, .start_pos = 0, .block_table = {}, .needs_logits = false,
                         .slot = slot};
  ForEachSlotState(state_, {&one, 1}, conv_floats_per_slot_, ssm_floats_per_slot_,
                   [&out](std::span<const float> state) {
                     out = std::copy(state.begin(), state.end(), out);
                   });
}

void CpuModelRunner::RestoreStateSnapshot(int snapshot, int slot) {
  TESSERA_CHECK(snapshot >= 1 && snapshot <= num_snapshots_,
                "RestoreStateSnapshot: no such snapshot");
  TESSERA_CHECK(slot >= 0 && slot < samplers_.max_num_seqs(), "RestoreStateSnapshot: no such slot");
  const float* in = reinterpret_cast<const float*>(snapshot_memory_.data()) +
                    (snapshot - 1) * state_floats_per_slot_;
  const SequenceWork one{.tokens = {}, .start_pos = 0, .block_table = {}, .needs_logits = false,
                         .slot = slot};
  ForEachSlotState(state_, {&one, 1}, conv_floats_per_slot_, ssm_floats_per_slot_,
                   [&in](std::span<float> state) {
                     std::copy_n(in, state.size(), state.begin());
                     in += state.size();
                   });
}

void CpuModelRunner::ClearState(int slot) {
  for (int l = 0; l < plan_->num_linear_layers; ++l) {
    std::fill_n(state_.conv[l].begin() + slot * conv_floats_per_slot_, conv_floats_per_slot_, 0.0f);
    std::fill_n(state_.ssm[l].begin() + slot * ssm_floats_per_slot_, ssm_floats_per_slot_, 0.0f);
  }
}


void CpuModelRunner::SaveStates(std::span<const SequenceWork> batch) {
  saved_states_.clear();
  ForEachSlotState(state_, batch, conv_floats_per_slot_, ssm_floats_per_slot_,
                   [this](std::span<const float> state) {
                     saved_states_.insert(saved_states_.end(), state.begin(), state.end());
                   });
}

void CpuModelRunner::RestoreStates(std::span<const SequenceWork> batch) {
  const float* saved = saved_states_.data();
  ForEachSlotState(state_, batch, conv_floats_per_slot_, ssm_floats_per_slot_,
                   [&saved](std::span<float> state) {
                     std::copy_n(saved, state.size(), state.begin());
                     saved += state.size();
                   });
}

KvPoolInfo CpuModelRunner::kv_pool() const {
  return {.block_size = kv_.shape.block_size,
          .num_blocks = kv_.shape.num_blocks,
          .bytes = kv_.shape.num_blocks * KvBlockBytes(*plan_, config_, kv_.shape.block_size, kv_dtype_)};
}

absl::Status CpuModelRunner::Validate(std::span<const SequenceWork> batch) const {
  return ValidateStepBatch(
      batch, config_,
      {.block_size = kv_.shape.block_size,
       .num_blocks = kv_.shape.num_blocks,
       .max_tokens = 0,
       .max_sequences = 0,
       .recurrent_slots = plan_->num_linear_layers > 0 ? samplers_.max_num_seqs() : 0},
      nullptr);
}

void CpuModelRunner::BeginSequence(int slot, const sampling::SamplingParams& params,
                                   std::span<const int32_t> prompt,
                                   std::span<const int32_t> generated) {
  samplers_.Begin(slot, params, prompt, generated);
  ClearState(slot);  // a new or re-admitted sequence recomputes from its first token
}

void CpuModelRunner::EndSequence(int slot) {
  samplers_.End(slot);
  ClearState(slot);
}

absl::Status CpuModelRunner::Step(std::span<const SequenceWork> batch, StepSamples* samples,
                                  const FillPendingMasks& fill_pending_masks) {
  const Clock::time_point start = Clock::now();
  samples->sequence_index.clear();
  samples->rows.clear();
  samples->info = StepRunInfo{};
  if (absl::Status status = Validate(batch); !status.ok()) return status;
  if (absl::Status status = samplers_.CheckRows(batch); !status.ok()) return status;
  PrepareInputs(batch, &step_logits_);
  RunForward(*plan_, config_, ops_);
  samples->info.launch_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  samples->info.device_seconds = -1;  // no device: the compute above is host time
  if (AnyMaskPending(batch)) {
    TESSERA_CHECK(fill_pending_masks != nullptr, "CpuModelRunner: pending masks and no fill");
    fill_pending_masks();
  }
  samplers_.SampleRows(batch, step_logits_, samples);
  return absl::OkStatus();
}

absl::Status CpuModelRunner::Forward(std::span<const SequenceWork> batch, StepLogits* logits) {
  if (absl::Status status = Validate(batch); !status.ok()) return status;
  PrepareInputs(batch, logits);
  SaveStates(batch);
  RunForward(*plan_, config_, ops_);
  RestoreStates(batch);
  return absl::OkStatus();
}

void CpuModelRunner::PrepareInputs(std::span<const SequenceWork> batch, StepLogits* logits) {
  token_ids_.clear();
  positions_.clear();
  attention_sequences_.clear();
  recurrent_sequences_.clear();
  logits->vocab_size = config_.vocab_size;
  logits->sequence_index.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceWork& s = batch[i];
    attention_sequences_.push_back({.query_begin = static_cast<int64_t>(token_ids_.size()),
                                    .num_query_tokens = static_cast<int32_t>(s.tokens.size()),
                                    .start_pos = s.start_pos,
                                    .block_table = s.block_table});
    if (plan_->num_linear_layers > 0) {
      recurrent_sequences_.push_back({.token_begin = static_cast<int64_t>(token_ids_.size()),
                                      .num_tokens = static_cast<int64_t>(s.tokens.size()),
                                      .state_slot = s.slot});
    }
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
                  .recurrent = recurrent_sequences_,
                  .logits_sequences = logits->sequence_index,
                  .logits = logits->values});
}

}  // namespace tessera::worker
