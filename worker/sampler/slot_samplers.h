// SlotSamplers: the per-slot sampling state of a runner that samples on the host (the cpu
// backend, test and benchmark stubs): one worker::Sampler per started slot, created by Begin
// (ModelRunner::BeginSequence) and destroyed by End (ModelRunner::EndSequence), plus the two
// halves of a host-sampling Step — checking the batch's sampling rows before the forward pass,
// and sampling the forward pass's logits rows with their slots' samplers after it.
//
// Ownership/threading: owned by the runner; used only from the thread that drives it (the
// worker's step thread).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/sampling/sampling_params.h"
#include "worker/model_runner.h"
#include "worker/sampler/sampler.h"

namespace tessera::worker {

class SlotSamplers {
 public:
  // Preconditions: max_num_seqs >= 1, vocab_size >= 1.
  SlotSamplers(int max_num_seqs, int vocab_size);

  int max_num_seqs() const { return static_cast<int>(samplers_.size()); }
  // False for a slot outside [0, max_num_seqs) too.
  bool started(int slot) const;

  // Builds `slot`'s sampler over `prompt`, then replays `generated` (the tokens sampled before a
  // preemption: penalties and RNG continue as if it had never stopped). Preconditions (abort
  // otherwise): slot in range and not started; params valid for the vocabulary; tokens in it.
  void Begin(int slot, const sampling::SamplingParams& params, std::span<const int32_t> prompt,
             std::span<const int32_t> generated);
  // Precondition (abort otherwise): the slot was started.
  void End(int slot);

  // INVALID_ARGUMENT "batch[i]: ..." when a row that needs_logits names a slot out of range or
  // not started.
  absl::Status CheckRows(std::span<const SequenceWork> batch) const;

  // Samples every row of `logits` (a forward pass over `batch`, which passed CheckRows) with its
  // slot's sampler into `samples` (sequence_index and rows; their storage is reused, info is
  // left alone). A row samples from its logits after its slot's logit_bias and its entry's
  // allowed_tokens mask.
  void SampleRows(std::span<const SequenceWork> batch, const StepLogits& logits,
                  StepSamples* samples);

 private:
  // `logits` after the slot's logit_bias and the row's structured-output mask
  // (kernels/cpu/logit_adjust.h), in adjusted_; `logits` itself when it has neither.
  std::span<const float> Adjusted(std::span<const float> logits,
                                  const sampling::SamplingParams& params,
                                  std::span<const uint32_t> allowed);

  int vocab_size_;
  std::vector<std::optional<Sampler>> samplers_;  // [max_num_seqs]; set while started
  std::vector<float> adjusted_;                   // one adjusted row, reused
};

}  // namespace tessera::worker
