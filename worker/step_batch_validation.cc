#include "worker/step_batch_validation.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera::worker {
namespace {

absl::Status SequenceError(size_t index, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("batch[", index, "]: ", what));
}

absl::Status ValidateSequence(size_t i, const SequenceWork& s, const model::ModelConfig& config,
                              const BatchLimits& limits) {
  if (s.tokens.empty()) return SequenceError(i, "has no tokens to process");
  for (int32_t id : s.tokens) {
    if (id < 0 || id >= config.vocab_size) {
      return SequenceError(i, absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                           config.vocab_size, ")"));
    }
  }
  const int64_t end = int64_t{s.start_pos} + static_cast<int64_t>(s.tokens.size());
  if (s.start_pos < 0 || end > config.context_length) {
    return SequenceError(i, absl::StrCat("positions [", s.start_pos, ", ", end,
                                         ") exceed the context [0, ", config.context_length, ")"));
  }
  const int64_t blocks_needed = (end + limits.block_size - 1) / limits.block_size;
  if (static_cast<int64_t>(s.block_table.size()) < blocks_needed) {
    return SequenceError(i, absl::StrCat("block_table has ", s.block_table.size(),
                                         " blocks, positions up to ", end, " need ",
                                         blocks_needed));
  }
  for (int32_t block : s.block_table.first(blocks_needed)) {
    if (block < 1 || block >= limits.num_blocks) {
      return SequenceError(i, absl::StrCat("block id ", block, " is outside [1, ",
                                           limits.num_blocks, ") (0 is the null block)"));
    }
  }
  return absl::OkStatus();
}

// Recurrent state is per slot: a sequence without one, or two sharing one, would corrupt it.
absl::Status ValidateRecurrentSlots(std::span<const SequenceWork> batch, int num_slots) {
  std::vector<bool> seen(static_cast<size_t>(num_slots));
  for (size_t i = 0; i < batch.size(); ++i) {
    const int32_t slot = batch[i].slot;
    if (slot < 0 || slot >= num_slots) {
      return SequenceError(i, absl::StrCat("slot ", slot, " is outside [0, ", num_slots,
                                           "): this model keeps recurrent state per slot"));
    }
    if (seen[static_cast<size_t>(slot)]) {
      return SequenceError(i, absl::StrCat("slot ", slot, " appears twice in the batch"));
    }
    seen[static_cast<size_t>(slot)] = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateStepBatch(std::span<const SequenceWork> batch,
                               const model::ModelConfig& config, const BatchLimits& limits,
                               const std::function<bool(int32_t slot)>& slot_started) {
  if (batch.empty()) return absl::InvalidArgumentError("batch is empty");
  if (limits.max_sequences > 0 && static_cast<int64_t>(batch.size()) > limits.max_sequences) {
    return absl::InvalidArgumentError(absl::StrCat("batch has ", batch.size(),
                                                   " sequences, more than the runner's ",
                                                   limits.max_sequences));
  }
  int64_t tokens = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (absl::Status s = ValidateSequence(i, batch[i], config, limits); !s.ok()) return s;
    tokens += static_cast<int64_t>(batch[i].tokens.size());
    if (slot_started && batch[i].needs_logits && !slot_started(batch[i].slot)) {
      return SequenceError(i, absl::StrCat("samples with slot ", batch[i].slot,
                                           ", which has no sampling state (BeginSequence)"));
    }
  }
  if (limits.recurrent_slots > 0) {
    if (absl::Status s = ValidateRecurrentSlots(batch, limits.recurrent_slots); !s.ok()) return s;
  }
  if (limits.max_tokens > 0 && tokens > limits.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch has ", tokens, " tokens, more than the runner's ", limits.max_tokens, " per step"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker
