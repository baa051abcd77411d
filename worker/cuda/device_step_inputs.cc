#include "worker/cuda/device_step_inputs.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
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
  l.last_rows = Place<int32_t>(&at, shape.num_rows);
  l.params = Place<cuda::SamplingRowParams>(&at, shape.num_rows);
  l.penalty_offsets = Place<int32_t>(&at, shape.num_rows + 1);
  l.delta_count = Place<int32_t>(&at, 1);
  l.deltas = at;
  return l;
}

absl::StatusOr<DeviceStepInputs> DeviceStepInputs::Create(device::DeviceRuntime& runtime,
                                                         const StepShape& capacity,
                                                         int64_t delta_capacity,
                                                         int64_t penalty_capacity) {
  DeviceStepInputs in;
  in.runtime_ = &runtime;
  in.capacity_ = capacity;
  in.delta_capacity_ = delta_capacity;
  in.penalty_capacity_ = std::max<int64_t>(penalty_capacity, 1);
  const size_t input_bytes = StepInputLayout::For(capacity).deltas_end(delta_capacity);
  in.staging_.assign(input_bytes, 0);
  TESSERA_ASSIGN_OR_RETURN(in.input_, device::DeviceMemory::Allocate(runtime, input_bytes));
  const size_t rows = static_cast<size_t>(capacity.num_rows);
  const size_t entries = static_cast<size_t>(in.penalty_capacity_);
  TESSERA_ASSIGN_OR_RETURN(in.penalties_, device::DeviceMemory::Allocate(
                                              runtime, AlignUp(entries * 4) * 2 + entries));
  in.host_outputs_.assign(in.OutputOffset(kTopLogprobs) +
                              rows * cuda::kSamplingMaxLogprobs * sizeof(float),
                          0);
  TESSERA_ASSIGN_OR_RETURN(in.outputs_,
                           device::DeviceMemory::Allocate(runtime, in.host_outputs_.size()));
  TESSERA_RETURN_IF_ERROR(runtime.Synchronize());
  return in;
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
  penalty_tokens_.clear();
  penalty_counts_.clear();
  penalty_in_prompt_.clear();
  penalties_used_ = false;
}

void DeviceStepInputs::AddPenaltyRow(std::span<const int32_t> tokens,
                                     std::span<const int32_t> counts,
                                     std::span<const uint8_t> in_prompt) {
  TESSERA_CHECK(tokens.size() == counts.size() && tokens.size() == in_prompt.size(),
                "DeviceStepInputs: penalty arrays disagree in length");
  TESSERA_CHECK(static_cast<int64_t>(penalty_tokens_.size() + tokens.size()) <= penalty_capacity_,
                "DeviceStepInputs: penalty entries beyond capacity");
  penalty_tokens_.insert(penalty_tokens_.end(), tokens.begin(), tokens.end());
  penalty_counts_.insert(penalty_counts_.end(), counts.begin(), counts.end());
  penalty_in_prompt_.insert(penalty_in_prompt_.end(), in_prompt.begin(), in_prompt.end());
  penalty_offsets_.push_back(static_cast<int32_t>(penalty_tokens_.size()));
  penalties_used_ |= !tokens.empty();
}

void DeviceStepInputs::AddDelta(const cuda::TableDelta& delta) {
  TESSERA_CHECK(num_deltas_ < delta_capacity_, "DeviceStepInputs: block-table deltas beyond capacity");
  Host<cuda::TableDelta>(layout_.deltas, size_t(delta_capacity_))[num_deltas_++] = delta;
}

cuda::SamplingPenalties DeviceStepInputs::device_penalties() const {
  const size_t entries = static_cast<size_t>(penalty_capacity_);
  const uint8_t* base = penalties_.as<uint8_t>();
  return {.offsets = Device<int32_t>(layout_.penalty_offsets),
          .tokens = reinterpret_cast<const int32_t*>(base),
          .generated_counts = reinterpret_cast<const int32_t*>(base + AlignUp(entries * 4)),
          .in_prompt = base + 2 * AlignUp(entries * 4)};
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
    penalty_offsets_.push_back(static_cast<int32_t>(penalty_tokens_.size()));
  }
  std::memcpy(staging_.data() + layout_.penalty_offsets, penalty_offsets_.data(),
              penalty_offsets_.size() * sizeof(int32_t));
  Host<int32_t>(layout_.delta_count, 1)[0] = static_cast<int32_t>(num_deltas_);
  TESSERA_RETURN_IF_ERROR(
      runtime_->CopyToDevice(input_.data(), staging_.data(), layout_.deltas_end(num_deltas_)));
  if (!penalties_used_) return absl::OkStatus();
  const cuda::SamplingPenalties p = device_penalties();
  const size_t n = penalty_tokens_.size();
  TESSERA_RETURN_IF_ERROR(
      runtime_->CopyToDevice(const_cast<int32_t*>(p.tokens), penalty_tokens_.data(), n * 4));
  TESSERA_RETURN_IF_ERROR(runtime_->CopyToDevice(const_cast<int32_t*>(p.generated_counts),
                                                 penalty_counts_.data(), n * 4));
  return runtime_->CopyToDevice(const_cast<uint8_t*>(p.in_prompt), penalty_in_prompt_.data(), n);
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
