// The model-runner interface: one call = one forward step over a batch of sequences.
//
// A step carries, per sequence, the tokens to process now (a prefill chunk or one decode token),
// the position of the first of them and the sequence's block table; the runner writes their K/V
// into the paged pool and returns logits for the sequences that sample this step (their last
// token). Backends (`cpu` now, `cuda` later) implement it; the worker's step executor (fed by the
// router's step plans) and the offline generator both drive it.
//
// Ownership/threading: a runner owns its weights view, its KV pool and scratch buffers; one
// thread (the worker's step thread) calls Forward at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/model/model_config.h"

namespace tessera::worker {

// One sequence's work in a step. Spans are borrowed for the duration of Forward.
struct SequenceWork {
  std::span<const int32_t> tokens;       // [num_tokens] >= 1 token ids to process now
  int32_t start_pos = 0;                 // position of tokens[0]
  std::span<const int32_t> block_table;  // logical block -> physical block; covers all positions
  bool needs_logits = false;             // return logits for the last token
};

// Logits of the sequences that asked for them, in batch order: [num_rows, vocab_size].
struct StepLogits {
  int vocab_size = 0;
  std::vector<int32_t> sequence_index;  // row r belongs to batch[sequence_index[r]]
  std::vector<float> values;
  std::span<const float> Row(size_t r) const {
    return std::span<const float>(values).subspan(r * vocab_size, vocab_size);
  }
};

struct KvPoolInfo {
  int block_size = 0;
  int64_t num_blocks = 0;  // block 0 is the reserved null block (DESIGN.md §4)
  int64_t bytes = 0;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const model::ModelConfig& config() const = 0;
  virtual KvPoolInfo kv_pool() const = 0;
  virtual std::string backend_name() const = 0;

  // Validates the batch (INVALID_ARGUMENT naming the sequence and field: token ids outside the
  // vocabulary, positions past the context, block tables too short or naming blocks outside
  // [1, num_blocks)), then runs the step. On error nothing was computed or written.
  virtual absl::Status Forward(std::span<const SequenceWork> batch, StepLogits* logits) = 0;
};

}  // namespace tessera::worker
