// StepExecutor's validation phase: every check a plan must pass before anything of it is applied
// (DESIGN.md §2, §8). Nothing here mutates the slot table; per-plan bookkeeping lives in
// epoch-stamped scratch arrays so a valid plan costs O(plan size), with no clearing and no
// allocation (messages are built only on the error path).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/step_executor.h"

namespace tessera::worker {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Physical block of logical block `index` in `table` followed by `appended`.
int32_t BlockAt(std::span<const int32_t> table, const v1::SequenceStep& seq, int64_t index) {
  const int64_t existing = static_cast<int64_t>(table.size());
  return index < existing ? table[index] : seq.new_blocks(static_cast<int>(index - existing));
}

}  // namespace

absl::Status StepExecutor::Invalid(const std::string& message) const {
  return absl::InvalidArgumentError(absl::StrCat("plan ", plan_step_, ": ", message));
}

void StepExecutor::AddRefDelta(int32_t block, int32_t table_delta, int32_t cached_delta) {
  if (ref_delta_epoch_[block] != epoch_) {
    ref_delta_epoch_[block] = epoch_;
    table_ref_delta_[block] = 0;
    cached_ref_delta_[block] = 0;
  }
  table_ref_delta_[block] += table_delta;
  cached_ref_delta_[block] += cached_delta;
}

int32_t StepExecutor::BlockRefsAfterPlan(int32_t block) const {
  const int32_t delta = ref_delta_epoch_[block] == epoch_ ? table_ref_delta_[block] : 0;
  return slots_.block_refs(block) + delta;
}

int32_t StepExecutor::CachedRefsAfterPlan(int32_t block) const {
  const int32_t delta = ref_delta_epoch_[block] == epoch_ ? cached_ref_delta_[block] : 0;
  return slots_.cached_refs(block) + delta;
}

absl::Status StepExecutor::Validate(const v1::StepPlan& plan) {
  plan_step_ = plan.step();
  ++epoch_;
  if (plan.step() != last_step_ + 1) {
    return Invalid(absl::StrCat("step = ", plan.step(), ", expected ", last_step_ + 1,
                                " (steps are consecutive from 1 on each stream)"));
  }
  if (absl::Status s = ValidateDrops(plan); !s.ok()) return s;
  if (absl::Status s = ValidateNewSequences(plan); !s.ok()) return s;
  if (absl::Status s = ValidateSequences(plan); !s.ok()) return s;
  return ValidateWrites(plan);
}

absl::Status StepExecutor::ValidateDrops(const v1::StepPlan& plan) {
  for (int i = 0; i < plan.drop_slots_size(); ++i) {
    const int32_t slot = plan.drop_slots(i);
    if (slot < 0 || slot >= slots_.max_num_seqs()) {
      return Invalid(absl::StrCat("drop_slots[", i, "] = ", slot, " is outside [0, ",
                                  slots_.max_num_seqs(), ")"));
    }
    SlotMark& mark = slot_marks_[slot];
    if (mark.dropped == epoch_) {
      return Invalid(absl::StrCat("drop_slots[", i, "] = ", slot, " is listed twice"));
    }
    const Slot& s = slots_.at(slot);
    if (!s.active) {
      return Invalid(absl::StrCat("drop_slots[", i, "] = ", slot, " is a free slot"));
    }
    mark.dropped = epoch_;
    const int32_t num_cached_blocks = s.cached_blocks_counted ? s.num_cached_blocks(block_size_)
                                                              : 0;
    for (size_t b = 0; b < s.block_table.size(); ++b) {
      AddRefDelta(s.block_table[b], -1, static_cast<int32_t>(b) < num_cached_blocks ? -1 : 0);
    }
  }
  return absl::OkStatus();
}

absl::Status StepExecutor::ValidateNewSequences(const v1::StepPlan& plan) {
  for (int i = 0; i < plan.new_sequences_size(); ++i) {
    const v1::NewSequence& seq = plan.new_sequences(i);
    const int32_t slot = seq.slot();
    if (slot < 0 || slot >= slots_.max_num_seqs()) {
      return Invalid(absl::StrCat("new_sequences[", i, "].slot = ", slot, " is outside [0, ",
                                  slots_.max_num_seqs(), ")"));
    }
    SlotMark& mark = slot_marks_[slot];
    if (mark.admitted == epoch_) {
      return Invalid(absl::StrCat("new_sequences[", i, "].slot = ", slot,
                                  " is already admitted by new_sequences[", mark.new_index, "]"));
    }
    if (slots_.at(slot).active && mark.dropped != epoch_) {
      return Invalid(absl::StrCat("new_sequences[", i, "].slot = ", slot,
                                  " is busy (not dropped in this plan)"));
    }
    if (absl::Status s = ValidateNewSequence(seq, i); !s.ok()) return s;
    mark.admitted = epoch_;
    mark.new_index = i;
  }
  return absl::OkStatus();
}

absl::Status StepExecutor::ValidateNewSequence(const v1::NewSequence& seq, int index) {
  // Built only on the error path (the field name would cost an allocation per admission).
  auto field = [index] { return absl::StrCat("new_sequences[", index, "]"); };
  const int num_tokens = seq.tokens_size();
  if (num_tokens == 0) return Invalid(field() + ".tokens is empty");
  if (num_tokens > max_context_) {
    return Invalid(absl::StrCat(field(), ".tokens has ", num_tokens, " tokens, more than max_context ",
                                max_context_));
  }
  for (int t = 0; t < num_tokens; ++t) {
    if (seq.tokens(t) < 0 || seq.tokens(t) >= vocab_size_) {
      return Invalid(absl::StrCat(field(), ".tokens[", t, "] = ", seq.tokens(t),
                                  " is outside the vocabulary [0, ", vocab_size_, ")"));
    }
  }
  if (seq.num_prompt_tokens() < 1 || seq.num_prompt_tokens() > num_tokens) {
    return Invalid(absl::StrCat(field(), ".num_prompt_tokens = ", seq.num_prompt_tokens(),
                                " is outside [1, ", num_tokens, "] (the tokens given)"));
  }
  const int32_t cached = seq.num_cached_tokens();
  if (cached < 0 || cached % block_size_ != 0 || cached >= num_tokens) {
    return Invalid(absl::StrCat(field(), ".num_cached_tokens = ", cached,
                                " must be a multiple of block_size ", block_size_,
                                " in [0, ", num_tokens, ") (the tokens given)"));
  }
  const int32_t restore = seq.restore_snapshot();
  if (restore < 0 || restore > num_snapshots_ || (restore > 0 && cached == 0)) {
    return Invalid(absl::StrCat(field(), ".restore_snapshot = ", restore, " must be 0 or in [1, ",
                                num_snapshots_, "] (the worker's state snapshots) with "
                                "num_cached_tokens > 0 (the position it was taken at)"));
  }
  const int32_t top = seq.sampling().top_logprobs();
  if (top < 0 || top > max_logprobs_) {
    return Invalid(absl::StrCat(field(), ".sampling.top_logprobs = ", top, " is outside [0, ",
                                max_logprobs_, "]"));
  }
  const absl::Status params =
      sampling::ValidateSamplingParams(SamplingParamsFromProto(seq.sampling()), vocab_size_);
  if (!params.ok()) return Invalid(absl::StrCat(field(), ".sampling.", params.message()));
  if (seq.grammar().kind() != v1::GRAMMAR_KIND_NONE) {
    if (grammars_ == nullptr) {
      return Invalid(absl::StrCat(field(), ".grammar: this worker has no vocabulary to constrain "
                                  "output with (no tokenizer, e.g. --load-format dummy)"));
    }
    const absl::Status grammar = grammars_->Check(
        seq.grammar(), std::span<const int32_t>(seq.tokens().data(), num_tokens)
                           .subspan(static_cast<size_t>(seq.num_prompt_tokens())));
    if (!grammar.ok()) return Invalid(absl::StrCat(field(), ".", grammar.message()));
  }
  return absl::OkStatus();
}

StepExecutor::SlotView StepExecutor::ViewOf(const v1::StepPlan& plan, int slot) const {
  const SlotMark& mark = slot_marks_[slot];
  if (mark.admitted == epoch_) {
    const v1::NewSequence& seq = plan.new_sequences(mark.new_index);
    return {.is_new = true,
            .table = {},
            .num_computed = seq.num_cached_tokens(),
            .num_known = seq.tokens_size(),
            .num_cached_tokens = seq.num_cached_tokens()};
  }
  const Slot& s = slots_.at(slot);
  return {.is_new = false,
          .table = s.block_table,
          .num_computed = s.num_computed,
          .num_known = s.num_known(),
          .num_cached_tokens = s.num_cached_tokens};
}

absl::Status StepExecutor::ValidateSequences(const v1::StepPlan& plan) {
  for (int j = 0; j < plan.sequences_size(); ++j) {
    const v1::SequenceStep& seq = plan.sequences(j);
    const int32_t slot = seq.slot();
    if (slot < 0 || slot >= slots_.max_num_seqs()) {
      return Invalid(absl::StrCat("sequences[", j, "].slot = ", slot, " is outside [0, ",
                                  slots_.max_num_seqs(), ")"));
    }
    SlotMark& mark = slot_marks_[slot];
    if (mark.scheduled == epoch_) {
      return Invalid(absl::StrCat("sequences[", j, "].slot = ", slot,
                                  " is already scheduled by sequences[", mark.sequence_index, "]"));
    }
    const bool live = mark.admitted == epoch_ || (slots_.at(slot).active && mark.dropped != epoch_);
    if (!live) {
      return Invalid(absl::StrCat("sequences[", j, "].slot = ", slot,
                                  " has no sequence (free, or dropped in this plan)"));
    }
    mark.scheduled = epoch_;
    mark.sequence_index = j;
    const SlotView view = ViewOf(plan, slot);
    if (absl::Status s = ValidateSequence(seq, j, view); !s.ok()) return s;
    if (absl::Status s = ValidateBlocks(seq, j, view); !s.ok()) return s;
    const int32_t num_cached_blocks = view.is_new ? view.num_cached_tokens / block_size_ : 0;
    for (int k = 0; k < seq.new_blocks_size(); ++k) {
      AddRefDelta(seq.new_blocks(k), 1, k < num_cached_blocks ? 1 : 0);
    }
  }
  // A prefix-cache hit's blocks must arrive with the admission (the proto's contract).
  for (int i = 0; i < plan.new_sequences_size(); ++i) {
    const v1::NewSequence& seq = plan.new_sequences(i);
    if (seq.num_cached_tokens() > 0 && slot_marks_[seq.slot()].scheduled != epoch_) {
      return Invalid(absl::StrCat("new_sequences[", i, "] (slot ", seq.slot(),
                                  ") has num_cached_tokens = ", seq.num_cached_tokens(),
                                  " but no sequences[] entry bringing its blocks"));
    }
  }
  return absl::OkStatus();
}

absl::Status StepExecutor::ValidateSequence(const v1::SequenceStep& seq, int index,
                                            const SlotView& view) {
  const int64_t n = seq.num_tokens();
  if (n < 1) {
    return Invalid(absl::StrCat("sequences[", index, "].num_tokens = ", n, " must be >= 1"));
  }
  const int64_t end = int64_t{view.num_computed} + n;
  if (end > view.num_known) {
    return Invalid(absl::StrCat("sequences[", index, "].num_tokens = ", n, ": slot ", seq.slot(),
                                " has ", view.num_computed, " of ", view.num_known,
                                " known tokens computed, so at most ",
                                view.num_known - view.num_computed, " remain"));
  }
  if (end > max_context_) {
    return Invalid(absl::StrCat("sequences[", index, "].num_tokens = ", n, ": positions [",
                                view.num_computed, ", ", end, ") of slot ", seq.slot(),
                                " run past max_context ", max_context_));
  }
  return ValidateSnapshotSave(seq, index);
}

absl::Status StepExecutor::ValidateSnapshotSave(const v1::SequenceStep& seq, int index) {
  const int32_t save = seq.save_snapshot();
  if (save == 0) return absl::OkStatus();
  if (save < 0 || save > num_snapshots_) {
    return Invalid(absl::StrCat("sequences[", index, "].save_snapshot = ", save,
                                " must be 0 or in [1, ", num_snapshots_,
                                "] (the worker's state snapshots)"));
  }
  uint64_t& mark = snapshot_marks_[static_cast<size_t>(save)];
  if (mark == epoch_) {
    return Invalid(absl::StrCat("sequences[", index, "].save_snapshot = ", save,
                                " is named by two sequences of the plan"));
  }
  mark = epoch_;
  return absl::OkStatus();
}

absl::Status StepExecutor::ValidateBlocks(const v1::SequenceStep& seq, int index,
                                          const SlotView& view) {
  for (int k = 0; k < seq.new_blocks_size(); ++k) {
    const int32_t block = seq.new_blocks(k);
    if (block < 1 || block >= num_blocks_) {
      return Invalid(absl::StrCat("sequences[", index, "].new_blocks[", k, "] = ", block,
                                  " is outside [1, ", num_blocks_, ")"));
    }
  }
  const int64_t table_size = static_cast<int64_t>(view.table.size()) + seq.new_blocks_size();
  if (table_size > max_blocks_per_seq_) {
    return Invalid(absl::StrCat("sequences[", index, "].new_blocks makes slot ", seq.slot(),
                                "'s block table ", table_size, " blocks long, more than the ",
                                max_blocks_per_seq_, " that max_context ", max_context_,
                                " needs"));
  }
  const int64_t end = int64_t{view.num_computed} + seq.num_tokens();
  const int64_t needed = CeilDiv(end, block_size_);
  if (table_size < needed) {
    return Invalid(absl::StrCat("sequences[", index, "].new_blocks: slot ", seq.slot(),
                                "'s block table would have ", table_size,
                                " blocks, positions up to ", end, " need ", needed));
  }
  if (seq.new_blocks_size() == 0) return absl::OkStatus();
  // Duplicates: stamp the existing table, then each appended block.
  ++table_epoch_;
  for (int32_t block : view.table) block_in_table_[block] = table_epoch_;
  for (int k = 0; k < seq.new_blocks_size(); ++k) {
    const int32_t block = seq.new_blocks(k);
    if (block_in_table_[block] == table_epoch_) {
      return Invalid(absl::StrCat("sequences[", index, "].new_blocks[", k, "] = ", block,
                                  " is already in slot ", seq.slot(), "'s block table"));
    }
    block_in_table_[block] = table_epoch_;
  }
  return absl::OkStatus();
}

// Every block a step writes must belong to that sequence alone: not in any live slot's cached
// (shared) prefix, and in no other live slot's table. Runs after all drops, admissions and
// appends of the plan are accounted for.
absl::Status StepExecutor::ValidateWrites(const v1::StepPlan& plan) {
  for (int j = 0; j < plan.sequences_size(); ++j) {
    const v1::SequenceStep& seq = plan.sequences(j);
    const SlotView view = ViewOf(plan, seq.slot());
    const int64_t begin = view.num_computed;
    const int64_t end = begin + seq.num_tokens();
    for (int64_t logical = begin / block_size_; logical <= (end - 1) / block_size_; ++logical) {
      const int32_t block = BlockAt(view.table, seq, logical);
      const char* problem = nullptr;
      if (CachedRefsAfterPlan(block) > 0) {
        problem = "a live sequence holds as cached (shared, read-only)";
      } else if (BlockRefsAfterPlan(block) > 1) {
        problem = "another live sequence's block table also lists (only its owner may write it)";
      }
      if (problem != nullptr) {
        return Invalid(absl::StrCat("sequences[", j, "] (slot ", seq.slot(),
                                    ") would write positions [", begin, ", ", end,
                                    ") into block ", block, " (logical block ", logical,
                                    "), which ", problem));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker
