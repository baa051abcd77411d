// StepExecutor: construction and the execution phases (validation is in
// step_executor_validation.cc).
#include "worker/step_executor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"

namespace tessera::worker {
namespace {

double Seconds(StepExecutor::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

sampling::SamplingParams SamplingParamsFromProto(const v1::SamplingParams& proto) {
  sampling::SamplingParams params{.temperature = proto.temperature(),
                        .top_k = proto.top_k(),
                        .top_p = proto.top_p(),
                        .min_p = proto.min_p(),
                        .repetition_penalty = proto.repetition_penalty(),
                        .presence_penalty = proto.presence_penalty(),
                        .frequency_penalty = proto.frequency_penalty(),
                        .seed = proto.seed(),
                        .num_logprobs = proto.top_logprobs()};
  for (const v1::TokenBias& b : proto.logit_bias()) {
    params.logit_bias_tokens.push_back(b.token_id());
    params.logit_bias_values.push_back(b.bias());
  }
  return params;
}

StepExecutor::StepExecutor(ModelRunner* runner, const StepExecutorOptions& options)
    : runner_(runner),
      vocab_size_(runner->config().vocab_size),
      max_context_(runner->config().context_length),
      block_size_(runner->kv_pool().block_size),
      num_blocks_(runner->kv_pool().num_blocks),
      max_logprobs_(std::min(sampling::kMaxLogprobs, runner->config().vocab_size)),
      max_blocks_per_seq_((max_context_ + block_size_ - 1) / block_size_),
      num_snapshots_(runner->state_snapshot_slots()),
      slots_(options.max_num_seqs, num_blocks_, block_size_),
      slot_marks_(static_cast<size_t>(options.max_num_seqs)),
      block_in_table_(static_cast<size_t>(num_blocks_), 0),
      ref_delta_epoch_(static_cast<size_t>(num_blocks_), 0),
      table_ref_delta_(static_cast<size_t>(num_blocks_), 0),
      cached_ref_delta_(static_cast<size_t>(num_blocks_), 0),
      snapshot_marks_(static_cast<size_t>(num_snapshots_) + 1, 0) {
  TESSERA_CHECK(max_context_ >= 1, "StepExecutor: the model needs a context length");
  TESSERA_CHECK(options.max_num_seqs <= runner->max_num_seqs(),
                "StepExecutor: more slots than the runner has sampling slots");
  if (options.grammar_vocabulary != nullptr) {
    grammars_ = std::make_unique<SlotGrammars>(*options.grammar_vocabulary, vocab_size_,
                                               options.max_num_seqs);
  }
  batch_.reserve(static_cast<size_t>(options.max_num_seqs));
  batch_slots_.reserve(static_cast<size_t>(options.max_num_seqs));
}

void StepExecutor::Reset() {
  for (int slot = 0; slot < slots_.max_num_seqs(); ++slot) {
    if (slots_.at(slot).active) EndSlot(slot);
  }
  last_step_ = 0;
}

absl::Status StepExecutor::Execute(const v1::StepPlan& plan, Clock::time_point received,
                                   v1::StepResult* result) {
  if (absl::Status status = Validate(plan); !status.ok()) return status;
  ApplyDrops(plan);
  ApplyNewSequences(plan);
  const Clock::time_point set_inputs_start = Clock::now();
  AppendBlocksAndBuildBatch(plan);
  MarkGuidedRows();

  const Clock::time_point step_start = Clock::now();
  stats_.set_inputs_seconds = Seconds(step_start - set_inputs_start);
  samples_.sequence_index.clear();
  samples_.rows.clear();
  samples_.info = StepRunInfo{};
  if (!batch_.empty()) {
    absl::Status status =
        guided_rows_.empty() ? runner_->Step(batch_, &samples_)
                             : runner_->Step(batch_, &samples_, [this] { FillGuidedMasks(); });
    if (!status.ok()) {
      // Validation covers everything the runner checks; reaching this is a worker bug.
      return absl::InternalError(absl::StrCat("plan ", plan.step(),
                                              ": the runner rejected a validated batch: ",
                                              status.message()));
    }
  }
  SaveSnapshots(plan);
  const Clock::time_point step_end = Clock::now();
  stats_.info = samples_.info;

  result->Clear();
  result->set_step(plan.step());
  SampleAndFill(result);
  last_step_ = plan.step();
  result->set_active_slots(slots_.num_active());
  FillTimings(received, step_start, step_end, result->mutable_timings());
  return absl::OkStatus();
}

// A runner with a device reports its launch and device time; a host runner (device_seconds < 0:
// cpu) computes and samples inside Step, and its launch time ends with the forward pass.
void StepExecutor::FillTimings(Clock::time_point received, Clock::time_point step_start,
                               Clock::time_point step_end, v1::StepTimings* timings) const {
  const StepRunInfo& info = stats_.info;
  const bool on_device = info.device_seconds >= 0;
  const Clock::time_point forward_end =
      on_device ? step_end
                : step_start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(info.launch_seconds));
  const Clock::time_point done = Clock::now();
  timings->set_host_seconds(Seconds(step_start - received) +
                            (on_device ? info.launch_seconds : 0.0));
  timings->set_device_seconds(on_device ? info.device_seconds : info.launch_seconds);
  timings->set_sample_seconds(Seconds(done - std::min(forward_end, done)));
  timings->set_total_seconds(Seconds(done - received));
  timings->set_graph_replayed(info.graph_replayed);
}

void StepExecutor::EndSlot(int slot) {
  slots_.Drop(slot);
  runner_->EndSequence(slot);
  if (grammars_ != nullptr) grammars_->End(slot);
}

void StepExecutor::ApplyDrops(const v1::StepPlan& plan) {
  for (int32_t slot : plan.drop_slots()) EndSlot(slot);
}

// The table gets every known token; the runner's sampling state the prompt, and the tokens
// generated before a preemption to replay.
void StepExecutor::ApplyNewSequences(const v1::StepPlan& plan) {
  for (const v1::NewSequence& seq : plan.new_sequences()) {
    const v1::SamplingParams& sampling = seq.sampling();
    const std::span<const int32_t> tokens(seq.tokens().data(),
                                          static_cast<size_t>(seq.tokens_size()));
    slots_.Admit(seq.slot(),
                 {.tokens = tokens,
                  .num_prompt_tokens = seq.num_prompt_tokens(),
                  .num_cached_tokens = seq.num_cached_tokens(),
                  .return_logprob = sampling.logprobs() || sampling.top_logprobs() > 0});
    const size_t num_prompt = static_cast<size_t>(seq.num_prompt_tokens());
    runner_->BeginSequence(seq.slot(), SamplingParamsFromProto(sampling),
                           tokens.first(num_prompt), tokens.subspan(num_prompt));
    if (seq.grammar().kind() != v1::GRAMMAR_KIND_NONE) {
      grammars_->Begin(seq.slot(), seq.grammar(), tokens.subspan(num_prompt));
    }
    // A prefix hit on a hybrid model: the recurrent state at the cached prefix's end.
    if (seq.restore_snapshot() > 0) runner_->RestoreStateSnapshot(seq.restore_snapshot(), seq.slot());
  }
}

// After the step: the recurrent states the router asked to keep (hybrid prefix caching).
void StepExecutor::SaveSnapshots(const v1::StepPlan& plan) {
  for (const v1::SequenceStep& seq : plan.sequences()) {
    if (seq.save_snapshot() > 0) runner_->SaveStateSnapshot(seq.slot(), seq.save_snapshot());
  }
}

void StepExecutor::AppendBlocksAndBuildBatch(const v1::StepPlan& plan) {
  batch_.clear();
  batch_slots_.clear();
  bool any_decode = false;
  bool any_prefill = false;
  stats_.num_tokens = 0;
  for (const v1::SequenceStep& seq : plan.sequences()) {
    slots_.AppendBlocks(seq.slot(), {seq.new_blocks().data(),
                                     static_cast<size_t>(seq.new_blocks_size())});
    const Slot& s = slots_.at(seq.slot());
    const int32_t end = s.num_computed + seq.num_tokens();
    // A decode feeds back one token past the prompt (the one this slot sampled last).
    const bool decode = seq.num_tokens() == 1 && s.num_computed >= s.num_prompt_tokens;
    any_decode |= decode;
    any_prefill |= !decode;
    stats_.num_tokens += seq.num_tokens();
    batch_.push_back({.tokens = std::span<const int32_t>(s.tokens).subspan(
                          s.num_computed, static_cast<size_t>(seq.num_tokens())),
                      .start_pos = s.num_computed,
                      .block_table = s.block_table,
                      .needs_logits = end == s.num_known(),
                      .slot = seq.slot()});
    batch_slots_.push_back(seq.slot());
  }
  stats_.num_sequences = static_cast<int32_t>(batch_.size());
  stats_.kind = any_decode ? (any_prefill ? StepKind::kMixed : StepKind::kDecode)
                           : (any_prefill ? StepKind::kPrefill : StepKind::kEmpty);
}

// Every guided row that samples will get its slot's mask. A terminated grammar leaves its row
// unconstrained.
void StepExecutor::MarkGuidedRows() {
  guided_rows_.clear();
  if (grammars_ == nullptr) return;
  for (SequenceWork& work : batch_) {
    work.mask_pending = work.needs_logits && grammars_->constrains(work.slot);
    if (work.mask_pending) guided_rows_.push_back(work.slot);
  }
}

// The masks of the marked rows, filled together (xgrammar spreads a batch over its threads).
void StepExecutor::FillGuidedMasks() {
  grammars_->FillMasks(guided_rows_);
  for (SequenceWork& work : batch_) {
    if (work.mask_pending) work.allowed_tokens = grammars_->Mask(work.slot);
  }
}

// Advances every scheduled slot's computed count, then appends each token the runner sampled
// (batch order = plan order) to its slot and writes it into the result.
void StepExecutor::SampleAndFill(v1::StepResult* result) {
  size_t num_sampling = 0;
  for (size_t i = 0; i < batch_.size(); ++i) {
    slots_.at(batch_slots_[i]).num_computed += static_cast<int32_t>(batch_[i].tokens.size());
    num_sampling += batch_[i].needs_logits ? 1 : 0;
  }
  TESSERA_CHECK(samples_.rows.size() == num_sampling &&
                    samples_.sequence_index.size() == num_sampling,
                "StepExecutor: the runner did not sample exactly the rows that needs_logits");
  for (size_t row = 0; row < samples_.sequence_index.size(); ++row) {
    const int32_t index = samples_.sequence_index[row];
    TESSERA_CHECK(index >= 0 && static_cast<size_t>(index) < batch_.size() &&
                      batch_[index].needs_logits,
                  "StepExecutor: the runner sampled a row that did not ask to");
    const int32_t slot = batch_slots_[index];
    Slot& s = slots_.at(slot);
    TESSERA_CHECK(s.num_computed == s.num_known(), "StepExecutor: a row sampled mid-prompt");
    const SampleResult& sampled = samples_.rows[row];
    s.tokens.push_back(sampled.token);
    if (grammars_ != nullptr && grammars_->active(slot)) grammars_->Accept(slot, sampled.token);
    v1::SampledToken* out = result->add_sampled();
    out->set_slot(slot);
    out->set_token_id(sampled.token);
    if (s.return_logprob) out->set_logprob(sampled.logprob);
    for (const TokenLogprob& top : sampled.top_logprobs) {
      v1::TopLogprob* entry = out->add_top_logprobs();
      entry->set_token_id(top.token);
      entry->set_logprob(top.logprob);
    }
  }
  // The spans in batch_ may dangle now (tokens grew); drop them.
  batch_.clear();
}

}  // namespace tessera::worker
