// The model-runner interface: one call = one forward step over a batch of sequences.
//
// A step carries, per sequence, the tokens to process now (a prefill chunk or one decode token),
// the position of the first of them and the sequence's block table; the runner writes their K/V
// into the paged pool. The serving path (Step) then samples the next token of every sequence
// that reached its last known token, on the runner's backend (the cpu backend with
// worker::Sampler, the cuda backend on the device), and returns only the sampled ids and
// logprobs. Forward returns the logits of those rows instead, without sampling (tests, oracles,
// diagnostics and benchmarks).
//
// Per-sequence sampling state (parameters, penalty counts, the RNG) lives in the runner, keyed
// by the worker's slot id: BeginSequence when a slot is admitted (a re-admitted sequence passes
// the tokens it generated before its preemption, so its penalties and RNG continue as if it had
// never stopped), EndSequence when it is dropped.
//
// Backends (`cpu`, `cuda` with its `emulated` device) implement it; the worker's step executor
// (fed by the router's step plans) and the offline generator drive it.
//
// Ownership/threading: a runner owns its weights view, its KV pool, its per-slot sampling state
// and scratch buffers; one thread (the worker's step thread) calls it at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/model/model_config.h"
#include "common/sampling/sampling_params.h"
#include "common/util/check.h"
#include "worker/graph_miss_reason.h"
#include "worker/sampler/sampler.h"

namespace tessera::worker {

// One sequence's work in a step. Spans are borrowed for the duration of the call.
struct SequenceWork {
  std::span<const int32_t> tokens;       // [num_tokens] >= 1 token ids to process now
  int32_t start_pos = 0;                 // position of tokens[0]
  std::span<const int32_t> block_table;  // logical block -> physical block; covers all positions
  bool needs_logits = false;             // the last token's logits are sampled (or returned)
  int32_t slot = -1;  // the slot whose sampling state samples it (required by Step when
                      // needs_logits) and, for models with recurrent layers, whose recurrent
                      // state the tokens advance (then required, distinct, by Step and Forward)
  // Structured output (Step, needs_logits rows): bit t of word t / 32 set = token t may be
  // sampled; the runner masks every other logit to -inf before sampling (logprobs then come from
  // the masked logits). ceil(vocab / 32) words, or empty: no constraint.
  std::span<const uint32_t> allowed_tokens = {};
  // The mask exists but is not known yet: Step's `fill_pending_masks` sets allowed_tokens while
  // the forward pass runs (a needs_logits row only).
  bool mask_pending = false;
};

// Host work a device overlaps with the forward pass: the caller sets allowed_tokens of the
// batch's mask_pending rows (through its own reference to the batch Step's span views). Step
// calls it once, after the forward pass is under way (a device runner: enqueued; a host runner:
// done) and before the sampling that reads the masks; only when some row is mask_pending.
using FillPendingMasks = std::function<void()>;

inline bool AnyMaskPending(std::span<const SequenceWork> batch) {
  return std::any_of(batch.begin(), batch.end(), [](const SequenceWork& s) { return s.mask_pending; });
}

// Logits of the sequences that asked for them, in batch order: [num_rows, vocab_size].
struct StepLogits {
  int vocab_size = 0;
  std::vector<int32_t> sequence_index;  // row r belongs to batch[sequence_index[r]]
  std::vector<float> values;
  std::span<const float> Row(size_t r) const {
    return std::span<const float>(values).subspan(r * vocab_size, vocab_size);
  }
};

// How a step ran on the backend, for the worker's metrics and the router's step trace.
struct StepRunInfo {
  bool graph_replayed = false;  // a captured CUDA graph ran the step
  bool graph_captured = false;  // this step captured the graph it replayed
  std::optional<GraphMissReason> graph_miss = std::nullopt;  // run eagerly where graphs may: why
  // Tokens the step ran beyond its own: padding up to the graph bucket it replayed.
  int padded_tokens = 0;
  // The runner's graphs after the step: buckets captured so far (start-up included), graphs
  // held, and the device memory their captures took.
  int64_t graph_captures = 0;
  int64_t graphs_held = 0;
  int64_t graph_memory_bytes = 0;
  // Step entry -> last kernel launched (host work: input building, copies, launches). On the
  // emulated device a launch runs the kernel, so this includes the emulated compute.
  double launch_seconds = 0;
  // Step entry -> the step's inputs laid out and their copy issued (validation, layout, the one
  // host->device copy): host work on every device, the emulated one included.
  double input_seconds = 0;
  // The step's device time from events around its work; < 0 when the backend has no device
  // (cpu: the compute is host time).
  double device_seconds = -1;
};

// The tokens sampled in one Step, in batch order of the sequences that sampled.
struct StepSamples {
  std::vector<int32_t> sequence_index;  // row r belongs to batch[sequence_index[r]]
  std::vector<SampleResult> rows;       // [sequence_index.size()]; top_logprobs as asked
  StepRunInfo info;
};

struct KvPoolInfo {
  int block_size = 0;
  int64_t num_blocks = 0;  // block 0 is the reserved null block (DESIGN.md §4)
  int64_t bytes = 0;
};

// The most state snapshots a runner keeps, whatever memory it is given: 4 per sequence slot
// (each is one cached prefix's end; the router evicts the least recently used), at most 65535.
inline int MaxStateSnapshots(int max_num_seqs) { return std::min(65535, 4 * max_num_seqs); }

struct ModelLayerInfo {
  int attention_layers = 0;          // with a paged KV pool
  int linear_layers = 0;             // with per-slot recurrent state
  int64_t state_bytes_per_sequence = 0;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const model::ModelConfig& config() const = 0;
  virtual KvPoolInfo kv_pool() const = 0;
  virtual std::string backend_name() const = 0;
  // Slots are [0, max_num_seqs()).
  virtual int max_num_seqs() const = 0;
  // The model's layer kinds as this runner holds them (Describe reports them).
  virtual ModelLayerInfo layer_info() const = 0;

  // Snapshots of one sequence's recurrent state for prefix caching on hybrid models, ids
  // [1, state_snapshot_slots()]; 0 slots (the default) for runners or models without them.
  virtual int state_snapshot_slots() const { return 0; }
  // Copies slot's recurrent state into `snapshot` / `snapshot` into slot's state. Preconditions
  // (aborts): 1 <= snapshot <= state_snapshot_slots(), 0 <= slot < max_num_seqs().
  virtual void SaveStateSnapshot(int slot, int snapshot) { NoSnapshots(slot, snapshot); }
  virtual void RestoreStateSnapshot(int snapshot, int slot) { NoSnapshots(slot, snapshot); }

  // Starts `slot`'s sampling state and clears its recurrent state. `generated` holds tokens the sequence generated before a
  // preemption: they count for its penalties and advance its RNG as sampling them did.
  // Preconditions (the step executor validated them): slot in range and not started; params
  // valid for the vocabulary; every token in [0, vocab_size).
  virtual void BeginSequence(int slot, const sampling::SamplingParams& params,
                             std::span<const int32_t> prompt,
                             std::span<const int32_t> generated) = 0;
  // Ends `slot`'s sampling state (and clears its recurrent state). Precondition: the slot was
  // started.
  virtual void EndSequence(int slot) = 0;

  // Validates the batch (INVALID_ARGUMENT naming the sequence and field: token ids outside the
  // vocabulary, positions past the context, block tables too short or naming blocks outside
  // [1, num_blocks), a sampling row whose slot was not started), runs the step and samples each
  // row that needs_logits with its slot's state (recording the token there). On error nothing
  // was computed, written or sampled. A batch with mask_pending rows needs `fill_pending_masks`.
  virtual absl::Status Step(std::span<const SequenceWork> batch, StepSamples* samples,
                            const FillPendingMasks& fill_pending_masks = {}) = 0;

  // The same validation and forward pass, returning the logits of the rows that need_logits
  // instead of sampling them (no sampling state is read or changed, and recurrent state is left
  // as it was: Forward then Step on the same tokens computes them twice from the same state).
  virtual absl::Status Forward(std::span<const SequenceWork> batch, StepLogits* logits) = 0;

 private:
  static void NoSnapshots(int, int) {
    TESSERA_CHECK(false, "a state snapshot was asked of a runner that holds none");
  }
};

}  // namespace tessera::worker
