// CudaModelRunner: the recurrent state of the linear-attention (Gated DeltaNet) layers, per
// (linear layer, slot) f32 on the device in the cpu backend's layouts (cuda_model_runner.h).
#include <algorithm>

#include "common/util/check.h"
#include "common/util/status_macros.h"
#include "worker/cuda/cuda_model_runner.h"

namespace tessera::worker {
namespace {

// Visits each (device address, floats) of the batch's slot states in a fixed order: per
// sequence, per linear layer, its conv state then its delta-rule state.
template <typename Fn>
absl::Status ForEachSlotState(const DeviceRecurrentState& state,
                              std::span<const SequenceWork> batch, int64_t conv_floats,
                              int64_t ssm_floats, Fn fn) {
  for (const SequenceWork& s : batch) {
    for (size_t l = 0; l < state.conv.size(); ++l) {
      TESSERA_RETURN_IF_ERROR(fn(state.conv[l] + s.slot * conv_floats, conv_floats));
      TESSERA_RETURN_IF_ERROR(fn(state.ssm[l] + s.slot * ssm_floats, ssm_floats));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CudaModelRunner::AllocateRecurrentState() {
  if (plan_.num_linear_layers == 0) return absl::OkStatus();
  const model::GdnDims& d = config_.hybrid->gdn;
  conv_floats_per_slot_ = int64_t{d.conv_kernel - 1} * model::GdnConvChannels(d);
  ssm_floats_per_slot_ = int64_t{d.num_v_heads} * d.head_k_dim * d.head_v_dim;
  const int64_t slots = options_.max_num_seqs;
  const size_t bytes = static_cast<size_t>(slots * state_floats_per_slot()) * sizeof(float);
  TESSERA_ASSIGN_OR_RETURN(state_memory_, device::DeviceMemory::Allocate(*runtime_, bytes));
  TESSERA_RETURN_IF_ERROR(runtime_->Fill(state_memory_.data(), 0, bytes));
  float* base = state_memory_.as<float>();
  for (int l = 0; l < plan_.num_linear_layers; ++l) {
    state_.conv.push_back(base);
    base += slots * conv_floats_per_slot_;
    state_.ssm.push_back(base);
    base += slots * ssm_floats_per_slot_;
  }
  const int64_t snapshot_bytes = state_floats_per_slot() * static_cast<int64_t>(sizeof(float));
  num_snapshots_ = static_cast<int>(
      std::min<int64_t>(options_.state_snapshot_bytes / snapshot_bytes,
                       MaxStateSnapshots(options_.max_num_seqs)));
  if (num_snapshots_ == 0) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(snapshot_memory_,
                           device::DeviceMemory::Allocate(
                               *runtime_, static_cast<size_t>(num_snapshots_ * snapshot_bytes)));
  return absl::OkStatus();
}

void CudaModelRunner::CopySnapshot(int slot, int snapshot, bool to_snapshot) {
  TESSERA_CHECK(snapshot >= 1 && snapshot <= num_snapshots_, "state snapshot id out of range");
  TESSERA_CHECK(slot >= 0 && slot < options_.max_num_seqs, "state snapshot slot out of range");
  float* stored = snapshot_memory_.as<float>() + (snapshot - 1) * state_floats_per_slot();
  const SequenceWork one{.tokens = {}, .start_pos = 0, .block_table = {}, .needs_logits = false,
                         .slot = slot};
  state_error_.Update(ForEachSlotState(
      state_, {&one, 1}, conv_floats_per_slot_, ssm_floats_per_slot_,
      [&](float* state, int64_t floats) {
        const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
        const absl::Status status = to_snapshot ? runtime_->CopyOnDevice(stored, state, bytes)
                                                : runtime_->CopyOnDevice(state, stored, bytes);
        stored += floats;
        return status;
      }));
}

void CudaModelRunner::SaveStateSnapshot(int slot, int snapshot) {
  CopySnapshot(slot, snapshot, /*to_snapshot=*/true);
}

void CudaModelRunner::RestoreStateSnapshot(int snapshot, int slot) {
  CopySnapshot(slot, snapshot, /*to_snapshot=*/false);
}

void CudaModelRunner::ClearState(int slot) {
  for (int l = 0; l < plan_.num_linear_layers && state_error_.ok(); ++l) {
    absl::Status status = runtime_->Fill(state_.conv[l] + slot * conv_floats_per_slot_, 0,
                                         conv_floats_per_slot_ * sizeof(float));
    if (status.ok()) {
      status = runtime_->Fill(state_.ssm[l] + slot * ssm_floats_per_slot_, 0,
                              ssm_floats_per_slot_ * sizeof(float));
    }
    state_error_.Update(status);
  }
}

absl::Status CudaModelRunner::SaveStates(std::span<const SequenceWork> batch) {
  if (plan_.num_linear_layers == 0) return absl::OkStatus();
  const size_t needed =
      batch.size() * static_cast<size_t>(state_floats_per_slot()) * sizeof(float);
  if (saved_states_.bytes() < needed) {  // Forward is never captured: growing here is safe
    TESSERA_RETURN_IF_ERROR(runtime_->Synchronize());
    TESSERA_ASSIGN_OR_RETURN(saved_states_, device::DeviceMemory::Allocate(*runtime_, needed));
  }
  float* saved = saved_states_.as<float>();
  return ForEachSlotState(state_, batch, conv_floats_per_slot_, ssm_floats_per_slot_,
                          [&](float* state, int64_t floats) {
                            const absl::Status status =
                                runtime_->CopyOnDevice(saved, state, floats * sizeof(float));
                            saved += floats;
                            return status;
                          });
}

absl::Status CudaModelRunner::RestoreStates(std::span<const SequenceWork> batch) {
  if (plan_.num_linear_layers == 0) return absl::OkStatus();
  const float* saved = saved_states_.as<float>();
  return ForEachSlotState(state_, batch, conv_floats_per_slot_, ssm_floats_per_slot_,
                          [&](float* state, int64_t floats) {
                            const absl::Status status =
                                runtime_->CopyOnDevice(state, saved, floats * sizeof(float));
                            saved += floats;
                            return status;
                          });
}

absl::Status CudaModelRunner::WarmUpWithoutState(bool sample) {
  const std::span<cuda::DeviceRecurrentSequence> entries = inputs_->recurrent();
  recurrent_entries_.assign(entries.begin(), entries.end());
  for (cuda::DeviceRecurrentSequence& entry : entries) entry.state_slot = -1;
  TESSERA_RETURN_IF_ERROR(inputs_->Upload());
  TESSERA_RETURN_IF_ERROR(EnqueueStep(sample));
  // The staging buffer is rewritten below: the warm-up's copy must have been consumed.
  TESSERA_RETURN_IF_ERROR(runtime_->Synchronize());
  std::copy(recurrent_entries_.begin(), recurrent_entries_.end(), entries.begin());
  return inputs_->Upload();
}

}  // namespace tessera::worker
