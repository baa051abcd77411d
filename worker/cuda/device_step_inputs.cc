#include "worker/cuda/device_step_inputs.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/sampling/sampling_params.h"
#include "common/util/check.h"
#include "common/util/status_macros.h"

namespace tessera::worker {
namespace {

constexpr size_t kAlign = 16;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Appends an array of `count` T to a layout being built; returns its offset.
template <typename T>
size_t Place(size_t* cursor, size_t count) {
  const size_t offset = *cursor;
  *cursor = AlignUp(offset + count * sizeof(T));
  return offset;
}

}  // namespace

StepInputLayout StepInputLayout::For(const StepShape& shape) {
  StepInputLayout l;
  size_t at = 0;
  l.token_ids = Place<int32_t>(&at, shape.num_tokens);
  l.positions = Place<int32_t>(&at, shape.num_tokens);
  l.slot_mapping = Place<int32_t>(&at, shape.num_tokens);
  l.decode_slots = Place<int32_t>(&at, shape.num_decode);
  l.decode_lens = Place<int32_t>(&at, shape.num_decode);
  l.prefill_slots = Place<int32_t>(&at, shape.num_prefill);
  l.prefill_query_start = Place<int32_t>(&at, shape.num_prefill + 1);
  l.prefill_lens = Place<int32_t>(&at, shape.num_prefill);
  l.recurrent = Place<cuda::DeviceRecurrentSequence>(&at, shape.num_decode + shape.num_prefill);
  l.last_rows = Place<int32_t>(&at, shape.num_rows);
  l.params = Place<cuda::SamplingRowParams>(&at, shape.num_rows);
  l.penalty_offsets = Place<int32_t>(&at, shape.num_rows + 1);
  l.mask_rows = Place<int32_t>(&at, shape.num_rows);
  l.bias_offsets = Place<int32_t>(&at, shape.num_rows + 1);
  l.delta_count = Place<int32_t>(&at, 1);
  l.deltas = at;
  return l;
}

absl::StatusOr<DeviceStepInputs> DeviceStepInputs::Create(device::DeviceRuntime& runtime,
                                                         const StepShape& capacity,
                                                         int64_t delta_capacity,
                                                         int64_t penalty_capacity,
                                                         int mask_words) {
  DeviceStepInputs in;
  in.runtime_ = &runtime;
  in.capacity_ = capacity;
  in.delta_capacity_ = delta_capacity;
  in.penalty_capacity_ = std::max<int64_t>(penalty_capacity, 1);
  const size_t input_bytes = StepInputLayout::For(capacity).deltas_end(delta_capacity);
  TESSERA_ASSIGN_OR_RETURN(in.staging_, device::HostMemory::Allocate(runtime, input_bytes));
  std::memset(in.staging_.data(), 0, input_bytes);
  TESSERA_ASSIGN_OR_RETURN(in.input_, device::DeviceMemory::Allocate(runtime, input_bytes));
  const size_t entries = static_cast<size_t>(in.penalty_capacity_);
  const size_t penalty_bytes = AlignUp(entries * 4) * 2 + entries;
  TESSERA_ASSIGN_OR_RETURN(in.penalties_, device::DeviceMemory::Allocate(runtime, penalty_bytes));
  TESSERA_ASSIGN_OR_RETURN(in.host_penalties_,
                           device::HostMemory::Allocate(runtime, penalty_bytes));
  in.mask_words_ = std::max(mask_words, 1);
  const size_t mask_bytes =
      static_cast<size_t>(capacity.num_rows) * static_cast<size_t>(in.mask_words_) * 4;
  TESSERA_ASSIGN_OR_RETURN(in.token_masks_, device::DeviceMemory::Allocate(runtime, mask_bytes));
  TESSERA_ASSIGN_OR_RETURN(in.host_token_masks_, device::HostMemory::Allocate(runtime, mask_bytes));
  in.bias_capacity_ = int64_t{capacity.num_rows} * sampling::kMaxLogitBiasTokens;
  const size_t bias_bytes = static_cast<size_t>(in.bias_capacity_) * 8;
  TESSERA_ASSIGN_OR_RETURN(in.biases_, device::DeviceMemory::Allocate(runtime, bias_bytes));
  TESSERA_ASSIGN_OR_RETURN(in.host_biases_, device::HostMemory::Allocate(runtime, bias_bytes));
  TESSERA_ASSIGN_OR_RETURN(in.host_outputs_,
                           device::HostMemory::Allocate(runtime, in.OutputBytes()));
  std::memset(in.host_outputs_.data(), 0, in.OutputBytes());
  TESSERA_ASSIGN_OR_RETURN(in.outputs_, device::DeviceMemory::Allocate(runtime, in.OutputBytes()));
  TESSERA_RETURN_IF_ERROR(runtime.Synchronize());
  return in;
}

size_t DeviceStepInputs::OutputBytes() const {
  return OutputOffset(kTopLogprobs) +
         static_cast<size_t>(capacity_.num_rows) * cuda::kSamplingMaxLogprobs * sizeof(float);
}

DeviceStepInputs::PenaltyArrays DeviceStepInputs::PenaltyArraysIn(void* base) const {
  const size_t entries = static_cast<size_t>(penalty_capacity_);
  auto* bytes = static_cast<uint8_t*>(base);
  return {.tokens = reinterpret_cast<int32_t*>(bytes),
          .counts = reinterpret_cast<int32_t*>(bytes + AlignUp(entries * 4)),
          .in_prompt = bytes + 2 * AlignUp(entries * 4)};
}

size_t DeviceStepInputs::OutputOffset(OutputArray array) const {
  const size_t rows = static_cast<size_t>(capacity_.num_rows);
  switch (array) {
    case kTokens: return 0;
    case kLogprobs: return AlignUp(rows * 4);
    case kTopIds: return 2 * AlignUp(rows * 4);
    case kTopLogprobs: return 2 * AlignUp(rows * 4) + AlignUp(rows * cuda::kSamplingMaxLogprobs * 4);
  }
  return 0;
}

void DeviceStepInputs::Begin(const StepShape& shape) {
  TESSERA_CHECK(shape.num_tokens <= capacity_.num_tokens &&
                    shape.num_decode + shape.num_prefill <= capacity_.num_decode &&
                    shape.num_rows <= capacity_.num_rows,
                "DeviceStepInputs: step shape beyond capacity");
  shape_ = shape;
  layout_ = StepInputLayout::For(shape);
  num_deltas_ = 0;
  penalty_offsets_.assign(1, 0);
  num_penalty_entries_ = 0;
  penalties_used_ = false;
  row_masks_.assign(static_cast<size_t>(shape.num_rows), -1);
  masked_rows_ = 0;
  masks_pending_ = false;
  bias_offsets_.assign(1, 0);
}

void DeviceStepInputs::AddBiasRow(std::span<const int32_t> tokens, std::span<const float> biases) {
  const int64_t used = bias_offsets_.back();
  TESSERA_CHECK(tokens.size() == biases.size() &&
                    used + static_cast<int64_t>(tokens.size()) <= bias_capacity_,
                "DeviceStepInputs: logit_bias entries disagree in length or exceed capacity");
  std::copy(tokens.begin(), tokens.end(), host_biases_.as<int32_t>() + used);
  std::copy(biases.begin(), biases.end(),
            reinterpret_cast<float*>(host_biases_.as<int32_t>() + bias_capacity_) + used);
  bias_offsets_.push_back(static_cast<int32_t>(used + static_cast<int64_t>(tokens.size())));
}

cuda::LogitAdjustments DeviceStepInputs::device_adjustments() const {
  const int32_t* tokens = biases_.as<int32_t>();
  return {.bias_offsets = Device<int32_t>(layout_.bias_offsets),
          .bias_tokens = tokens,
          .bias_values = reinterpret_cast<const float*>(tokens + bias_capacity_),
          .masks = token_masks_.as<uint32_t>(),
          .mask_rows = Device<int32_t>(layout_.mask_rows)};
}

void DeviceStepInputs::SetRowMask(int row, std::span<const uint32_t> allowed_tokens) {
  WriteRowMask(row, allowed_tokens);
  row_masks_[static_cast<size_t>(row)] = row;
  masked_rows_ = std::max(masked_rows_, row + 1);
}

void DeviceStepInputs::MarkRowMaskPending(int row) {
  TESSERA_CHECK(row >= 0 && row < shape_.num_rows, "DeviceStepInputs: a pending mask out of range");
  row_masks_[static_cast<size_t>(row)] = row;
  masked_rows_ = std::max(masked_rows_, row + 1);
  masks_pending_ = true;
}

void DeviceStepInputs::WriteRowMask(int row, std::span<const uint32_t> allowed_tokens) {
  TESSERA_CHECK(row >= 0 && row < shape_.num_rows &&
                    allowed_tokens.size() == static_cast<size_t>(mask_words_),
                "DeviceStepInputs: a token mask for a row out of range or of the wrong width");
  std::copy(allowed_tokens.begin(), allowed_tokens.end(),
            host_token_masks_.as<uint32_t>() + static_cast<size_t>(row) * mask_words_);
}

absl::Status DeviceStepInputs::UploadMasks() {
  if (masked_rows_ == 0) return absl::OkStatus();
  return runtime_->CopyToDevice(
      token_masks_.data(), host_token_masks_.data(),
      static_cast<size_t>(masked_rows_) * static_cast<size_t>(mask_words_) * 4);
}

void DeviceStepInputs::AddPenaltyRow(std::span<const int32_t> tokens,
                                     std::span<const int32_t> counts,
                                     std::span<const uint8_t> in_prompt) {
  TESSERA_CHECK(tokens.size() == counts.size() && tokens.size() == in_prompt.size(),
                "DeviceStepInputs: penalty arrays disagree in length");
  TESSERA_CHECK(num_penalty_entries_ + static_cast<int64_t>(tokens.size()) <= penalty_capacity_,
                "DeviceStepInputs: penalty entries beyond capacity");
  const PenaltyArrays host = PenaltyArraysIn(host_penalties_.data());
  std::copy(tokens.begin(), tokens.end(), host.tokens + num_penalty_entries_);
  std::copy(counts.begin(), counts.end(), host.counts + num_penalty_entries_);
  std::copy(in_prompt.begin(), in_prompt.end(), host.in_prompt + num_penalty_entries_);
  num_penalty_entries_ += static_cast<int64_t>(tokens.size());
  penalty_offsets_.push_back(static_cast<int32_t>(num_penalty_entries_));
  penalties_used_ |= !tokens.empty();
}

void DeviceStepInputs::AddDelta(const cuda::TableDelta& delta) {
  TESSERA_CHECK(num_deltas_ < delta_capacity_, "DeviceStepInputs: block-table deltas beyond capacity");
  Host<cuda::TableDelta>(layout_.deltas, size_t(delta_capacity_))[num_deltas_++] = delta;
}

cuda::SamplingPenalties DeviceStepInputs::device_penalties() const {
  const PenaltyArrays device = PenaltyArraysIn(penalties_.data());
  return {.offsets = Device<int32_t>(layout_.penalty_offsets),
          .tokens = device.tokens,
          .generated_counts = device.counts,
          .in_prompt = device.in_prompt};
}

cuda::SamplingOutputs DeviceStepInputs::device_outputs() const {
  uint8_t* base = outputs_.as<uint8_t>();
  return {.tokens = reinterpret_cast<int32_t*>(base + OutputOffset(kTokens)),
          .logprobs = reinterpret_cast<float*>(base + OutputOffset(kLogprobs)),
          .top_ids = reinterpret_cast<int32_t*>(base + OutputOffset(kTopIds)),
          .top_logprobs = reinterpret_cast<float*>(base + OutputOffset(kTopLogprobs)),
          .probs = nullptr};
}

absl::Status DeviceStepInputs::Upload() {
  // Rows without penalty entries still need their (empty) CSR range.
  while (penalty_offsets_.size() < static_cast<size_t>(shape_.num_rows) + 1) {
    penalty_offsets_.push_back(static_cast<int32_t>(num_penalty_entries_));
  }
  std::memcpy(staging_.as<uint8_t>() + layout_.penalty_offsets, penalty_offsets_.data(),
              penalty_offsets_.size() * sizeof(int32_t));
  std::copy(row_masks_.begin(), row_masks_.end(),
            Host<int32_t>(layout_.mask_rows, row_masks_.size()).begin());
  // Rows without bias entries still need their (empty) CSR range.
  bias_offsets_.resize(static_cast<size_t>(shape_.num_rows) + 1, bias_offsets_.back());
  std::copy(bias_offsets_.begin(), bias_offsets_.end(),
            Host<int32_t>(layout_.bias_offsets, bias_offsets_.size()).begin());
  Host<int32_t>(layout_.delta_count, 1)[0] = static_cast<int32_t>(num_deltas_);
  TESSERA_RETURN_IF_ERROR(
      runtime_->CopyToDevice(input_.data(), staging_.data(), layout_.deltas_end(num_deltas_)));
  if (const size_t n = static_cast<size_t>(bias_offsets_.back()); n > 0) {
    int32_t* device = biases_.as<int32_t>();
    const int32_t* host = host_biases_.as<int32_t>();
    TESSERA_RETURN_IF_ERROR(runtime_->CopyToDevice(device, host, n * 4));
    TESSERA_RETURN_IF_ERROR(
        runtime_->CopyToDevice(device + bias_capacity_, host + bias_capacity_, n * 4));
  }
  if (!masks_pending_) TESSERA_RETURN_IF_ERROR(UploadMasks());
  if (!penalties_used_) return absl::OkStatus();
  const PenaltyArrays device = PenaltyArraysIn(penalties_.data());
  const PenaltyArrays host = PenaltyArraysIn(host_penalties_.data());
  const size_t n = static_cast<size_t>(num_penalty_entries_);
  TESSERA_RETURN_IF_ERROR(runtime_->CopyToDevice(device.tokens, host.tokens, n * 4));
  TESSERA_RETURN_IF_ERROR(runtime_->CopyToDevice(device.counts, host.counts, n * 4));
  return runtime_->CopyToDevice(device.in_prompt, host.in_prompt, n);
}

absl::Status DeviceStepInputs::Download(bool with_top_logprobs) {
  const size_t rows = static_cast<size_t>(shape_.num_rows);
  const size_t bytes = with_top_logprobs
                           ? OutputOffset(kTopLogprobs) + rows * cuda::kSamplingMaxLogprobs * 4
                           : OutputOffset(kLogprobs) + rows * 4;
  TESSERA_RETURN_IF_ERROR(runtime_->CopyToHost(host_outputs_.data(), outputs_.data(), bytes));
  return runtime_->Synchronize();
}

}  // namespace tessera::worker
