// DeviceStepInputs: the device runner's persistent step buffers. Every step's inputs (token ids,
// positions, KV slot mapping, block tables and context lengths of its decode and prefill
// sequences, each sequence's recurrent-state entry for the linear-attention layers, the rows
// that sample and their sampling parameters) are written into one host
// staging area laid out exactly as a region of the persistent device input buffer, and go over
// in ONE host->device copy; the sampler's outputs (ids, logprobs, top-N) come back in one
// device->host copy. Nothing is allocated on the device after construction.
//
// The layout depends only on the step's shape (StepShape), so a CUDA graph captured for a
// decode bucket reads the same device addresses every replay, whatever the sequences. Block
// tables stay on the device per slot (device_block_tables.h): the step carries each sequence's
// slot and the table entries that changed (deltas, last in the layout so the copy ends with the
// last one used). Penalty state (CSR, sampling_types.h)
// entries live in their own fixed-capacity buffer so their addresses never move; they are copied
// only on steps where a row uses penalties (3 more small copies; the row offsets ride in the one
// input copy, all equal when no row has penalties).
//
// Host staging, the penalty entries' host mirror and the output buffer are pinned host memory
// (DeviceRuntime::AllocateHost), so the copies are truly asynchronous; each is rewritten only
// after the previous step's Download waited for the stream.
//
// Ownership: owns its device buffers and host staging; the runtime must outlive it.
// Threading: the runner's step thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/block_tables.cuh"
#include "kernels/cuda/logit_adjust.cuh"
#include "kernels/cuda/recurrent_sequence.cuh"
#include "kernels/cuda/sampling_types.h"
#include "kernels/device/device_memory.h"
#include "kernels/device/device_runtime.h"

namespace tessera::worker {

// How many of each a step has. Decode sequences (one token) come first in token order, then
// prefill sequences; rows are the sequences that sample.
struct StepShape {
  int num_tokens = 0;
  int num_decode = 0;
  int num_prefill = 0;
  int num_rows = 0;
};

// Byte offsets of each input array for one shape (16-byte aligned, in this order). The block-
// table deltas come last: `deltas_end(n)` bytes hold a step with n of them.
struct StepInputLayout {
  size_t token_ids = 0, positions = 0, slot_mapping = 0;
  size_t decode_slots = 0, decode_lens = 0;
  size_t prefill_slots = 0, prefill_query_start = 0, prefill_lens = 0;
  size_t recurrent = 0;
  size_t last_rows = 0, params = 0, penalty_offsets = 0, mask_rows = 0, bias_offsets = 0;
  size_t delta_count = 0, deltas = 0;
  size_t deltas_end(int64_t n) const { return deltas + size_t(n) * sizeof(cuda::TableDelta); }
  static StepInputLayout For(const StepShape& shape);
};

class DeviceStepInputs {
 public:
  // Capacity: the largest shape any step may have; delta_capacity: block-table deltas per step;
  // penalty_capacity: CSR entries over all rows; mask_words: 32-bit words of one row's
  // structured-output token mask (ceil(vocab / 32)).
  static absl::StatusOr<DeviceStepInputs> Create(device::DeviceRuntime& runtime,
                                                 const StepShape& capacity,
                                                 int64_t delta_capacity,
                                                 int64_t penalty_capacity, int mask_words);

  const StepShape& capacity() const { return capacity_; }

  // Starts a step of `shape` (within capacity): the host arrays below are sized for it and the
  // penalty CSR is empty.
  void Begin(const StepShape& shape);
  const StepShape& shape() const { return shape_; }

  // Host staging for the current step ([num_tokens], [num_decode * stride], ...).
  std::span<int32_t> token_ids() { return Host<int32_t>(layout_.token_ids, shape_.num_tokens); }
  std::span<int32_t> positions() { return Host<int32_t>(layout_.positions, shape_.num_tokens); }
  std::span<int32_t> slot_mapping() {
    return Host<int32_t>(layout_.slot_mapping, shape_.num_tokens);
  }
  // The slot (block-table row) of each decode / prefill sequence.
  std::span<int32_t> decode_slots() { return Host<int32_t>(layout_.decode_slots, shape_.num_decode); }
  std::span<int32_t> decode_lens() { return Host<int32_t>(layout_.decode_lens, shape_.num_decode); }
  std::span<int32_t> prefill_slots() {
    return Host<int32_t>(layout_.prefill_slots, shape_.num_prefill);
  }
  std::span<int32_t> prefill_query_start() {
    return Host<int32_t>(layout_.prefill_query_start, shape_.num_prefill + 1);
  }
  std::span<int32_t> prefill_lens() {
    return Host<int32_t>(layout_.prefill_lens, shape_.num_prefill);
  }
  // Every sequence's rows and recurrent-state slot, in the activations' order (decode sequences
  // then prefill; inert padding entries: slot -1), [num_decode + num_prefill].
  std::span<cuda::DeviceRecurrentSequence> recurrent() {
    return Host<cuda::DeviceRecurrentSequence>(layout_.recurrent,
                                               shape_.num_decode + shape_.num_prefill);
  }
  std::span<int32_t> last_rows() { return Host<int32_t>(layout_.last_rows, shape_.num_rows); }
  std::span<cuda::SamplingRowParams> params() {
    return Host<cuda::SamplingRowParams>(layout_.params, shape_.num_rows);
  }
  // Appends one row's penalty entries (rows in order; call once per row, empty when none).
  void AddPenaltyRow(std::span<const int32_t> tokens, std::span<const int32_t> counts,
                     std::span<const uint8_t> in_prompt);
  int64_t penalty_capacity() const { return penalty_capacity_; }
  // The row's structured-output mask (mask_words words); rows without one stay unmasked.
  void SetRowMask(int row, std::span<const uint32_t> allowed_tokens);
  // A row whose mask is known only after the forward pass is enqueued: marked now (which rows
  // are masked goes over with the inputs; Upload then leaves every mask to UploadMasks), its
  // words written by WriteRowMask, and all the step's masks sent by UploadMasks, enqueued after
  // the forward pass and before the sampling that reads them.
  void MarkRowMaskPending(int row);
  void WriteRowMask(int row, std::span<const uint32_t> allowed_tokens);
  absl::Status UploadMasks();
  // Appends one row's logit_bias entries (rows in order; call once per row, empty when none).
  void AddBiasRow(std::span<const int32_t> tokens, std::span<const float> biases);
  // Appends a block-table delta (precondition: fewer than delta_capacity this step).
  void AddDelta(const cuda::TableDelta& delta);
  int64_t num_deltas() const { return num_deltas_; }

  // The one host->device copy of the step's inputs (plus the penalty arrays when used).
  absl::Status Upload();

  // Device addresses of the current layout.
  const int32_t* device_token_ids() const { return Device<int32_t>(layout_.token_ids); }
  const int32_t* device_positions() const { return Device<int32_t>(layout_.positions); }
  const int32_t* device_slot_mapping() const { return Device<int32_t>(layout_.slot_mapping); }
  const int32_t* device_decode_slots() const { return Device<int32_t>(layout_.decode_slots); }
  const int32_t* device_decode_lens() const { return Device<int32_t>(layout_.decode_lens); }
  const int32_t* device_prefill_slots() const { return Device<int32_t>(layout_.prefill_slots); }
  const int32_t* device_prefill_query_start() const {
    return Device<int32_t>(layout_.prefill_query_start);
  }
  const int32_t* device_prefill_lens() const { return Device<int32_t>(layout_.prefill_lens); }
  const cuda::DeviceRecurrentSequence* device_recurrent() const {
    return Device<cuda::DeviceRecurrentSequence>(layout_.recurrent);
  }
  const int32_t* device_last_rows() const { return Device<int32_t>(layout_.last_rows); }
  const int32_t* device_delta_count() const { return Device<int32_t>(layout_.delta_count); }
  const cuda::TableDelta* device_deltas() const {
    return Device<cuda::TableDelta>(layout_.deltas);
  }
  const cuda::SamplingRowParams* device_params() const {
    return Device<cuda::SamplingRowParams>(layout_.params);
  }
  // Always non-null (a graph captured without penalties must serve a step with them); the
  // offsets are all 0 when no row has penalties.
  cuda::SamplingPenalties device_penalties() const;
  // The rows' logit_bias (CSR) and structured-output masks, at fixed addresses (a graph captured
  // without them serves steps with them); entries and masks are copied only on steps that use
  // them.
  cuda::LogitAdjustments device_adjustments() const;

  // The sampler's outputs for `num_rows` rows at fixed addresses (rows-major arrays sized by
  // the capacity, so a graph's addresses never move).
  cuda::SamplingOutputs device_outputs() const;
  // One device->host copy of the outputs of the current step's rows (top-N only when asked),
  // then waits for it.
  absl::Status Download(bool with_top_logprobs);
  int32_t sampled_token(int row) const { return HostOutput<int32_t>(kTokens)[row]; }
  float sampled_logprob(int row) const { return HostOutput<float>(kLogprobs)[row]; }
  // The row's top-N ids and logprobs (kSamplingMaxLogprobs entries; -1 / -inf past its N).
  std::span<const int32_t> top_ids(int row) const {
    return {HostOutput<int32_t>(kTopIds) + size_t(row) * cuda::kSamplingMaxLogprobs,
            size_t(cuda::kSamplingMaxLogprobs)};
  }
  std::span<const float> top_logprobs(int row) const {
    return {HostOutput<float>(kTopLogprobs) + size_t(row) * cuda::kSamplingMaxLogprobs,
            size_t(cuda::kSamplingMaxLogprobs)};
  }

 private:
  DeviceStepInputs() = default;
  template <typename T>
  std::span<T> Host(size_t offset, size_t count) {
    return {reinterpret_cast<T*>(staging_.as<uint8_t>() + offset), count};
  }
  template <typename T>
  const T* Device(size_t offset) const {
    return reinterpret_cast<const T*>(input_.as<uint8_t>() + offset);
  }
  // The output arrays, in order; each holds capacity rows (x kSamplingMaxLogprobs for top-N).
  enum OutputArray { kTokens, kLogprobs, kTopIds, kTopLogprobs };
  size_t OutputOffset(OutputArray array) const;
  size_t OutputBytes() const;
  // The penalty arrays within a buffer of the penalties' layout (device or host mirror).
  struct PenaltyArrays {
    int32_t* tokens;
    int32_t* counts;
    uint8_t* in_prompt;
  };
  PenaltyArrays PenaltyArraysIn(void* base) const;
  template <typename T>
  const T* HostOutput(OutputArray array) const {
    return reinterpret_cast<const T*>(host_outputs_.as<uint8_t>() + OutputOffset(array));
  }

  device::DeviceRuntime* runtime_ = nullptr;
  StepShape capacity_;
  int64_t delta_capacity_ = 0;
  int64_t num_deltas_ = 0;
  int64_t penalty_capacity_ = 0;
  StepShape shape_;
  StepInputLayout layout_;
  device::HostMemory staging_;  // pinned, sized for the capacity layout
  device::DeviceMemory input_;
  // Penalty entries: [tokens | counts | in_prompt], each penalty_capacity_ long, on the device
  // and mirrored in pinned host memory (the same layout); num_penalty_entries_ used this step.
  device::DeviceMemory penalties_;
  device::HostMemory host_penalties_;
  // Token masks [capacity rows, mask_words_] on the device and mirrored in pinned host memory;
  // row_masks_[r]: row r's mask index this step, or -1; masked_rows_: rows [0, n) to copy.
  int mask_words_ = 0;
  device::DeviceMemory token_masks_;
  device::HostMemory host_token_masks_;
  std::vector<int32_t> row_masks_;
  int masked_rows_ = 0;
  bool masks_pending_ = false;  // some row's mask comes after Upload (UploadMasks sends them)
  // logit_bias entries: [tokens | biases], each bias_capacity_ long, on the device and mirrored
  // in pinned host memory; bias_offsets_ this step's CSR row offsets.
  int64_t bias_capacity_ = 0;
  device::DeviceMemory biases_;
  device::HostMemory host_biases_;
  std::vector<int32_t> bias_offsets_;
  std::vector<int32_t> penalty_offsets_;
  int64_t num_penalty_entries_ = 0;
  bool penalties_used_ = false;
  // Outputs: [tokens | logprobs | top_ids | top_logprobs], capacity rows each.
  device::DeviceMemory outputs_;
  device::HostMemory host_outputs_;  // pinned, same layout, for the one copy
};

}  // namespace tessera::worker
