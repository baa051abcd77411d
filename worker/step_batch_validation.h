// The checks every ModelRunner makes on a batch before running it (the step executor validated
// the plan it came from, so a failure here means a caller bypassed it): each sequence has tokens
// inside the vocabulary, positions inside the context, a block table long enough for them whose
// blocks are in [1, num_blocks), a distinct state slot when the model has recurrent layers, and
// — for Step — a started sampling slot when it samples.
// Errors are INVALID_ARGUMENT naming `batch[i]` and the field. Any thread; no state.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "absl/status/status.h"
#include "common/model/model_config.h"
#include "worker/model_runner.h"

namespace tessera::worker {

struct BatchLimits {
  int block_size = 0;
  int64_t num_blocks = 0;
  int64_t max_tokens = 0;     // tokens per step; 0 = no limit
  int max_sequences = 0;      // sequences per step; 0 = no limit
  // > 0 for models with recurrent layers: every sequence (Step and Forward) names a distinct
  // slot in [0, recurrent_slots), the slot whose recurrent state it advances.
  int recurrent_slots = 0;
};

// `slot_started` (may be empty: Forward) says whether a sampling row's slot has sampling state.
absl::Status ValidateStepBatch(std::span<const SequenceWork> batch,
                               const model::ModelConfig& config, const BatchLimits& limits,
                               const std::function<bool(int32_t slot)>& slot_started);

}  // namespace tessera::worker
