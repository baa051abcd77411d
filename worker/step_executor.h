// Executes the step protocol's plans (proto/tessera/worker/v1/worker.proto, DESIGN.md §2) on a
// ModelRunner: one StepPlan in, one StepResult out.
//
// A plan is a delta against the slot table. Execute runs it in named phases:
//   validate   every field of the plan against the table and the runner's limits; on any error
//              return INVALID_ARGUMENT naming the field ("plan 7: sequences[2].new_blocks[0] =
//              5000 is outside [1, 4096)") and change nothing;
//   drops      end the listed slots (finished or preempted requests) in the table and their
//              sampling state in the runner (ModelRunner::EndSequence);
//   admissions start the new sequences in the table and the runner (BeginSequence: a re-admitted
//              one passes its generated tokens, so its penalties and RNG continue identically);
//   blocks     append each scheduled slot's new blocks to its table;
//   batch      one SequenceWork per scheduled slot: tokens[computed, computed + num_tokens)
//              (persistent vectors: nothing is allocated per step once warm);
//   masks      every guided slot that samples is marked mask_pending: its grammar's token mask
//              (SequenceWork::allowed_tokens; sampler/slot_grammars.h) is filled inside the step,
//              while the device runs the forward pass (ModelRunner's FillPendingMasks);
//   step       ModelRunner::Step: the forward pass, and every slot whose computed count reached
//              its known tokens samples (on the runner's backend, with its per-slot state);
//   fill       each sampled token is appended to its slot (so the next decode step needs no token
//              ids), advances the slot's grammar, and goes into the result in plan order
//              (+ logprobs when asked), with the timings and the active slots.
//
// Timings (StepTimings): host = plan received -> Step entry, plus the runner's launch time on a
// device runner (-> last launch); device = the runner's device time, or on a host runner (cpu)
// the forward pass's wall time; sample = end of the forward pass (device runners: Step's return)
// -> result ready; graph_replayed from the runner.
//
// What validation checks (each names the field): step numbers consecutive from 1; slot ids in
// [0, max_num_seqs); dropping a free slot or one twice; admitting into a busy slot (one not
// dropped in the same plan) or one slot twice; new sequence tokens (non-empty, within the
// vocabulary and max_context), num_prompt_tokens in [1, tokens], num_cached_tokens a multiple of
// block_size below the token count (and its blocks sent in this plan); sampling parameters
// (ValidateSamplingParams, top_logprobs <= max_logprobs); a sequence entry for a slot twice or for
// a slot with no sequence; num_tokens >= 1 and computed + num_tokens <= known tokens; positions
// past max_context; block ids outside [1, num_blocks), a block listed twice in one slot's table,
// a table longer than max_context needs or too short for the positions computed; writes into a
// block that a live slot holds as cached (shared), or that another live slot's table lists (a
// block is written only by the one sequence that owns it); state snapshot ids outside
// [1, the runner's snapshots], a restore without cached tokens, two saves into one snapshot.
// Snapshots (hybrid prefix caching): a restore is applied right after its admission, saves
// after the runner's step (the state after the step's tokens).
//
// Ownership: owns the slot table and the step's scratch; borrows the runner (which must outlive
// it). Threading: single-threaded — every call comes from the worker's step thread, the only
// thread that drives the runner.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tessera/worker/v1/worker.pb.h"
#include "worker/model_runner.h"
#include "worker/sampler/slot_grammars.h"
#include "worker/slot_table.h"

namespace tessera::worker {

// The sampler's parameters from the protocol's (top_logprobs -> num_logprobs); unvalidated.
sampling::SamplingParams SamplingParamsFromProto(const tessera::worker::v1::SamplingParams& proto);

// What a step ran, for the worker's metrics (worker_metrics.h).
enum class StepKind {
  kEmpty,    // a drop-only plan: no forward pass
  kPrefill,  // every entry processes tokens the router sent (prompt chunks, recompute)
  kDecode,   // every entry processes the one token this worker sampled last
  kMixed,    // both
};

struct StepStats {
  StepKind kind = StepKind::kEmpty;
  int32_t num_sequences = 0;  // batch entries
  int32_t num_tokens = 0;     // tokens in the forward pass
  // Blocks appended + batch built: the "set inputs" part of the host time (on the cpu backend the
  // runner reads the batch directly; a device runner's input copies are in info.launch_seconds).
  double set_inputs_seconds = 0;
  StepRunInfo info{};  // how the runner ran it (graphs, launch and device time); default if empty
};

struct StepExecutorOptions {
  int max_num_seqs = 256;  // slots [0, max_num_seqs); >= 1
  // The model's vocabulary for structured outputs (read during construction only); null: a plan
  // asking for a grammar is INVALID_ARGUMENT (e.g. --load-format dummy has no tokenizer).
  const GrammarVocabulary* grammar_vocabulary = nullptr;
};

class StepExecutor {
 public:
  using Clock = std::chrono::steady_clock;

  // Preconditions: runner != nullptr and outlives the executor; 1 <= options.max_num_seqs <=
  // runner->max_num_seqs() (the executor's slots are the runner's sampling slots).
  StepExecutor(ModelRunner* runner, const StepExecutorOptions& options);

  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;

  // Runs one plan; `received` is when the plan arrived (timings count from it). Fills `result`
  // (cleared first; its storage is reused). INVALID_ARGUMENT: the plan is bad and nothing
  // changed. Any other error comes from the runner failing a batch that passed validation (a
  // bug): the table may be half-updated and the caller must Reset (end the stream).
  absl::Status Execute(const tessera::worker::v1::StepPlan& plan, Clock::time_point received,
                       tessera::worker::v1::StepResult* result);

  // Drops every slot (ending its sampling state in the runner) and expects step 1 next (a new
  // stream).
  void Reset();

  const SlotTable& slots() const { return slots_; }
  // The slots' grammar state, null without a vocabulary. Set at construction; its Prepare may be
  // called from any thread (slot_grammars.h).
  SlotGrammars* grammars() const { return grammars_.get(); }
  uint64_t last_step() const { return last_step_; }
  // The last successful Execute's numbers.
  const StepStats& last_step_stats() const { return stats_; }
  int max_logprobs() const { return max_logprobs_; }

 private:
  // One scheduled slot as the plan leaves it (after its drops and admissions), for validation.
  struct SlotView {
    bool is_new = false;
    std::span<const int32_t> table;  // the slot's current block table (empty when new)
    int32_t num_computed = 0;
    int32_t num_known = 0;
    int32_t num_cached_tokens = 0;
  };
  // Per-slot marks of the plan being validated; valid when the epoch equals epoch_.
  struct SlotMark {
    uint64_t dropped = 0;
    uint64_t admitted = 0;
    uint64_t scheduled = 0;
    int32_t new_index = -1;       // into plan.new_sequences
    int32_t sequence_index = -1;  // into plan.sequences
  };

  // Validation phases (step_executor_validation.cc), in order. Each returns INVALID_ARGUMENT
  // prefixed "plan N: " and never mutates the table.
  absl::Status Validate(const tessera::worker::v1::StepPlan& plan);
  absl::Status ValidateDrops(const tessera::worker::v1::StepPlan& plan);
  absl::Status ValidateNewSequences(const tessera::worker::v1::StepPlan& plan);
  absl::Status ValidateNewSequence(const tessera::worker::v1::NewSequence& seq, int index);
  absl::Status ValidateSequences(const tessera::worker::v1::StepPlan& plan);
  absl::Status ValidateSequence(const tessera::worker::v1::SequenceStep& seq, int index,
                                const SlotView& view);
  absl::Status ValidateSnapshotSave(const tessera::worker::v1::SequenceStep& seq, int index);
  absl::Status ValidateBlocks(const tessera::worker::v1::SequenceStep& seq, int index,
                              const SlotView& view);
  absl::Status ValidateWrites(const tessera::worker::v1::StepPlan& plan);
  SlotView ViewOf(const tessera::worker::v1::StepPlan& plan, int slot) const;
  absl::Status Invalid(const std::string& message) const;
  // Block reference counts as they will be after this plan's drops, admissions and appends.
  void AddRefDelta(int32_t block, int32_t table_delta, int32_t cached_delta);
  int32_t BlockRefsAfterPlan(int32_t block) const;
  int32_t CachedRefsAfterPlan(int32_t block) const;

  // Execution phases (step_executor.cc), in order; the plan is valid.
  void EndSlot(int slot);  // in the table and the runner
  void ApplyDrops(const tessera::worker::v1::StepPlan& plan);
  void ApplyNewSequences(const tessera::worker::v1::StepPlan& plan);
  void AppendBlocksAndBuildBatch(const tessera::worker::v1::StepPlan& plan);
  void MarkGuidedRows();    // mask_pending on every guided row that samples
  void FillGuidedMasks();   // their allowed_tokens (the runner calls it during the forward pass)
  void SaveSnapshots(const tessera::worker::v1::StepPlan& plan);
  void SampleAndFill(tessera::worker::v1::StepResult* result);
  void FillTimings(Clock::time_point received, Clock::time_point step_start,
                   Clock::time_point step_end, tessera::worker::v1::StepTimings* timings) const;

  ModelRunner* runner_;
  const int vocab_size_;
  const int max_context_;
  const int block_size_;
  const int64_t num_blocks_;
  const int max_logprobs_;
  const int32_t max_blocks_per_seq_;  // ceil(max_context / block_size)
  const int num_snapshots_;           // the runner's state snapshots, ids [1, num_snapshots_]
  SlotTable slots_;
  uint64_t last_step_ = 0;
  uint64_t plan_step_ = 0;  // the plan being validated (for messages)

  // Validation scratch, stamped with epochs so nothing is cleared per plan.
  uint64_t epoch_ = 0;        // one per Validate call
  uint64_t table_epoch_ = 0;  // one per block-table duplicate check
  std::vector<SlotMark> slot_marks_;           // [max_num_seqs]
  std::vector<uint64_t> block_in_table_;       // [num_blocks] table_epoch_ when listed
  std::vector<uint64_t> ref_delta_epoch_;      // [num_blocks] epoch_ when the deltas are valid
  std::vector<int32_t> table_ref_delta_;       // [num_blocks] change of SlotTable::block_refs
  std::vector<int32_t> cached_ref_delta_;      // [num_blocks] change of SlotTable::cached_refs
  std::vector<uint64_t> snapshot_marks_;       // [num_snapshots + 1] epoch_ when saved by the plan

  // Structured outputs: the slots' grammar matchers (null without a vocabulary).
  std::unique_ptr<SlotGrammars> grammars_;
  std::vector<int32_t> guided_rows_;  // batch entries whose slot has a grammar, this step

  // Step buffers, reused every step.
  std::vector<SequenceWork> batch_;
  std::vector<int32_t> batch_slots_;  // slot of each batch entry
  StepSamples samples_;
  StepStats stats_;
};

}  // namespace tessera::worker
