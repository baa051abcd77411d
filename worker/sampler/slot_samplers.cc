#include "worker/sampler/slot_samplers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"
#include "kernels/cpu/logit_adjust.h"

namespace tessera::worker {

SlotSamplers::SlotSamplers(int max_num_seqs, int vocab_size)
    : vocab_size_(vocab_size), samplers_(static_cast<size_t>(std::max(max_num_seqs, 0))) {
  TESSERA_CHECK(max_num_seqs >= 1, "SlotSamplers: max_num_seqs must be >= 1");
  TESSERA_CHECK(vocab_size >= 1, "SlotSamplers: vocab_size must be >= 1");
}

bool SlotSamplers::started(int slot) const {
  return slot >= 0 && slot < max_num_seqs() && samplers_[slot].has_value();
}

void SlotSamplers::Begin(int slot, const sampling::SamplingParams& params,
                         std::span<const int32_t> prompt, std::span<const int32_t> generated) {
  TESSERA_CHECK(slot >= 0 && slot < max_num_seqs(), "SlotSamplers::Begin: slot out of range");
  TESSERA_CHECK(!samplers_[slot].has_value(), "SlotSamplers::Begin: slot already started");
  TESSERA_CHECK(sampling::ValidateSamplingParams(params, vocab_size_).ok(),
                "SlotSamplers::Begin: invalid sampling parameters");
  auto in_vocab = [&](int32_t id) { return id >= 0 && id < vocab_size_; };
  TESSERA_CHECK(std::all_of(prompt.begin(), prompt.end(), in_vocab) &&
                    std::all_of(generated.begin(), generated.end(), in_vocab),
                "SlotSamplers::Begin: token outside the vocabulary");
  samplers_[slot].emplace(params, vocab_size_, prompt);
  samplers_[slot]->RestoreGenerated(generated);
}

void SlotSamplers::End(int slot) {
  TESSERA_CHECK(started(slot), "SlotSamplers::End: slot not started");
  samplers_[slot].reset();
}

absl::Status SlotSamplers::CheckRows(std::span<const SequenceWork> batch) const {
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].needs_logits) continue;
    const int32_t slot = batch[i].slot;
    if (slot < 0 || slot >= max_num_seqs()) {
      return absl::InvalidArgumentError(absl::StrCat("batch[", i, "]: slot ", slot,
                                                     " is outside [0, ", max_num_seqs(), ")"));
    }
    if (!samplers_[slot].has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch[", i, "]: slot ", slot, " samples but its sequence was not started"));
    }
  }
  return absl::OkStatus();
}

void SlotSamplers::SampleRows(std::span<const SequenceWork> batch, const StepLogits& logits,
                              StepSamples* samples) {
  const size_t num_rows = logits.sequence_index.size();
  samples->sequence_index.assign(logits.sequence_index.begin(), logits.sequence_index.end());
  samples->rows.resize(num_rows);  // keeps the capacity of earlier steps
  for (size_t r = 0; r < num_rows; ++r) {
    const SequenceWork& work = batch[logits.sequence_index[r]];
    TESSERA_CHECK(work.needs_logits && started(work.slot),
                  "SlotSamplers::SampleRows: a row without a started slot (CheckRows first)");
    TESSERA_CHECK(!work.mask_pending || !work.allowed_tokens.empty(),
                  "SlotSamplers::SampleRows: a pending token mask was never filled");
    Sampler& sampler = *samplers_[work.slot];
    samples->rows[r] =
        sampler.Sample(Adjusted(logits.Row(r), sampler.params(), work.allowed_tokens));
  }
}

std::span<const float> SlotSamplers::Adjusted(std::span<const float> logits,
                                              const sampling::SamplingParams& params,
                                              std::span<const uint32_t> allowed) {
  if (params.logit_bias_tokens.empty() && allowed.empty()) return logits;
  adjusted_.assign(logits.begin(), logits.end());
  kernels::cpu::AddLogitBias(adjusted_, params.logit_bias_tokens, params.logit_bias_values);
  if (!allowed.empty()) {
    TESSERA_CHECK(allowed.size() * 32 >= logits.size(),
                  "SlotSamplers: a token mask narrower than the vocabulary");
    kernels::cpu::MaskLogits(adjusted_, allowed, adjusted_);
  }
  return adjusted_;
}


}  // namespace tessera::worker
