// CudaModelRunner: running a laid-out step (eagerly or through the graph cache), sampling on the
// device, and reading the results back.
#include <algorithm>
#include <chrono>
#include <numeric>

#include "common/util/check.h"
#include "common/util/status_macros.h"
#include "worker/cuda/cuda_model_runner.h"

namespace tessera::worker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

absl::Status CudaModelRunner::EnqueuePass(StepPieces::Mode mode, bool sample) {
  using Mode = StepPieces::Mode;
  // The table deltas are sequence-shaped: eager in a piecewise step (applying them twice, in a
  // warm-up and the replay, writes the same entries).
  if (mode != Mode::kCapture) TESSERA_RETURN_IF_ERROR(tables_->Enqueue(*kernels_, *inputs_));
  ops_->BeginStep(*inputs_, attention_, pieces_.get());
  RunForward(plan_, config_, *ops_);
  TESSERA_RETURN_IF_ERROR(ops_->status());
  if (!sample || mode == Mode::kWarmUp || mode == Mode::kCapture) return absl::OkStatus();
  return EnqueueSampling();
}

absl::Status CudaModelRunner::EnqueueSampling() {
  if (inputs_->shape().num_rows == 0) return absl::OkStatus();
  // logit_bias, then the guided rows' disallowed tokens to -inf (always launched, so a graph
  // captured without them serves steps with them; other rows are untouched).
  TESSERA_RETURN_IF_ERROR(kernels_->AdjustLogits(ops_->mutable_logits(),
                                                 inputs_->shape().num_rows, config_.vocab_size,
                                                 inputs_->device_adjustments()));
  return kernels_->Sampling(ops_->logits(), inputs_->shape().num_rows, config_.vocab_size,
                            inputs_->device_params(), inputs_->device_penalties(),
                            inputs_->device_outputs(), sampling_workspace_.data());
}

// Eager graph mode: every bucket is captured now, each over an all-padding step of its size,
// uploaded, since the capture's warm-up runs it (padding writes no K/V and samples nothing); a
// capture records addresses and shapes, the values are whatever a later replay finds.
absl::Status CudaModelRunner::CaptureEagerGraphs() {
  util::LoadProgress* progress = options_.progress;
  if (progress != nullptr && graphs_->mode() == CudaGraphMode::kEager) {
    const size_t buckets = graphs_->buckets().size() +
                           (options_.mixed_step_graphs ? graphs_->token_buckets().size() : 0);
    progress->Begin("capturing CUDA graphs", static_cast<int64_t>(buckets),
                    util::LoadProgress::Unit::kItems);
  }
  int64_t reported = 0;  // captures passed to `progress` so far
  const auto report = [&] {
    if (progress == nullptr) return;
    progress->Advance(graphs_->all_captures() - reported);
    reported = graphs_->all_captures();
  };
  TESSERA_RETURN_IF_ERROR(graphs_->CaptureAll([&](int bucket) {
    report();
    LayOut({}, bucket, /*sampling=*/true, /*in_graph=*/true);
    // Uploaded for the warm-up run only: a copy enqueued while capturing would join the graph.
    if (!runtime_->capturing()) TESSERA_RETURN_IF_ERROR(inputs_->Upload());
    return EnqueueStep(/*sample=*/true);
  }));
  // Token buckets: a step of padding tokens only (no sequence, no row), laid out per pass.
  TESSERA_RETURN_IF_ERROR(graphs_->CaptureAllMixed([&](int tokens, StepPieces::Mode mode) {
    report();
    LayOut({}, 0, /*sampling=*/true, /*in_graph=*/false, tokens);
    if (mode != StepPieces::Mode::kCapture) TESSERA_RETURN_IF_ERROR(inputs_->Upload());
    return EnqueuePass(mode, /*sample=*/true);
  }));
  if (progress != nullptr) progress->End();
  return absl::OkStatus();
}

absl::Status CudaModelRunner::UploadAndMarkStart(Clock::time_point start,
                                                  double* input_seconds) {
  TESSERA_RETURN_IF_ERROR(inputs_->Upload());
  *input_seconds = SecondsSince(start);
  return runtime_->RecordEvent(step_start_);
}

// Decode-only: padded to its bucket and replayed whole (forward-only when masks come later).
absl::StatusOr<GraphStepOutcome> CudaModelRunner::RunDecodeStep(
    std::span<const SequenceWork> batch, bool masks_later, Clock::time_point start,
    double* input_seconds) {
  const int n = static_cast<int>(batch.size());
  GraphCache& graphs = masks_later ? *forward_graphs_ : *graphs_;
  LayOut(batch, graphs.RowsToRun(n), /*sampling=*/true, /*in_graph=*/graphs.WillReplay(n));
  TESSERA_RETURN_IF_ERROR(UploadAndMarkStart(start, input_seconds));
  // A capture runs the step twice (warm-up, then the replay): recurrent state must advance once.
  bool warm_up_without_state = plan_.num_linear_layers > 0 && graphs.WillCapture(n);
  auto enqueue = [this, &warm_up_without_state, masks_later](int rows) {
    TESSERA_CHECK(rows == inputs_->shape().num_decode + inputs_->shape().num_prefill,
                  "CudaModelRunner: the graph cache ran a different row count than laid out");
    if (warm_up_without_state && !runtime_->capturing()) {
      warm_up_without_state = false;
      return WarmUpWithoutState(/*sample=*/!masks_later);
    }
    return EnqueueStep(/*sample=*/!masks_later);
  };
  return graphs.RunDecode(n, enqueue);
}

// With prefill rows: padded to its token bucket and replayed piecewise (step_pieces.h).
absl::StatusOr<GraphStepOutcome> CudaModelRunner::RunMixedStep(
    std::span<const SequenceWork> batch, int tokens, bool masks_later, Clock::time_point start,
    double* input_seconds) {
  LayOut(batch, static_cast<int>(batch.size()), /*sampling=*/true, /*in_graph=*/false,
         graphs_->TokensToRun(tokens) - tokens);
  TESSERA_RETURN_IF_ERROR(UploadAndMarkStart(start, input_seconds));
  return graphs_->RunMixed(tokens, [this, masks_later](StepPieces::Mode mode) {
    return EnqueuePass(mode, /*sample=*/!masks_later);
  });
}

absl::Status CudaModelRunner::Step(std::span<const SequenceWork> batch, StepSamples* samples,
                                   const FillPendingMasks& fill_pending_masks) {
  const Clock::time_point start = Clock::now();
  TESSERA_RETURN_IF_ERROR(state_error_);
  TESSERA_RETURN_IF_ERROR(Validate(batch, /*sampling=*/true));
  // Masks that come during the forward pass: the step (or its graph) stops before sampling.
  const bool masks_later = AnyMaskPending(batch);
  TESSERA_CHECK(!masks_later || fill_pending_masks != nullptr,
                "CudaModelRunner: rows with pending masks and nothing to fill them");
  int tokens = 0;
  for (const SequenceWork& s : batch) tokens += static_cast<int>(s.tokens.size());
  double input_seconds = 0;
  absl::StatusOr<GraphStepOutcome> outcome =
      Graphable(batch) ? RunDecodeStep(batch, masks_later, start, &input_seconds)
                       : RunMixedStep(batch, tokens, masks_later, start, &input_seconds);
  if (!outcome.ok()) return outcome.status();
  if (masks_later) TESSERA_RETURN_IF_ERROR(SampleWithLateMasks(batch, fill_pending_masks));
  TESSERA_RETURN_IF_ERROR(runtime_->RecordEvent(step_end_));
  samples->info = {.graph_replayed = outcome->replayed,
                   .graph_captured = outcome->captured,
                   .graph_miss = outcome->miss,
                   .padded_tokens = inputs_->shape().num_tokens - tokens,
                   .graph_captures = graphs_->all_captures() + forward_graphs_->all_captures(),
                   .graphs_held = graphs_->graphs_held() + forward_graphs_->graphs_held(),
                   .graph_memory_bytes =
                       graphs_->graph_memory_bytes() + forward_graphs_->graph_memory_bytes(),
                   .launch_seconds = SecondsSince(start),
                   .input_seconds = input_seconds};
  bool any_top = false;
  for (const SequenceWork& s : batch) {
    any_top |= s.needs_logits && sampling_.params(s.slot).num_logprobs > 0;
  }
  TESSERA_RETURN_IF_ERROR(inputs_->Download(any_top));
  TESSERA_ASSIGN_OR_RETURN(samples->info.device_seconds,
                           runtime_->ElapsedSeconds(step_start_, step_end_));
  CollectSamples(batch, samples);
  return absl::OkStatus();
}

absl::Status CudaModelRunner::SampleWithLateMasks(std::span<const SequenceWork> batch,
                                                  const FillPendingMasks& fill_pending_masks) {
  fill_pending_masks();  // host work while the device runs the forward pass
  for (size_t row = 0; row < row_sequence_.size(); ++row) {
    const SequenceWork& s = batch[row_sequence_[row]];
    if (!s.mask_pending) continue;
    TESSERA_CHECK(!s.allowed_tokens.empty(), "CudaModelRunner: a pending mask was not filled");
    inputs_->WriteRowMask(static_cast<int>(row), s.allowed_tokens);
  }
  TESSERA_RETURN_IF_ERROR(inputs_->UploadMasks());
  return EnqueueSampling();
}

const std::vector<int32_t>& CudaModelRunner::RowsInBatchOrder() {
  rows_in_batch_order_.resize(row_sequence_.size());
  std::iota(rows_in_batch_order_.begin(), rows_in_batch_order_.end(), 0);
  std::sort(rows_in_batch_order_.begin(), rows_in_batch_order_.end(),
            [&](int32_t a, int32_t b) { return row_sequence_[a] < row_sequence_[b]; });
  return rows_in_batch_order_;
}

// Rows back in batch order; each sampled token is recorded in its slot's sampling state.
void CudaModelRunner::CollectSamples(std::span<const SequenceWork> batch, StepSamples* samples) {
  const size_t rows = row_sequence_.size();
  const std::vector<int32_t>& by_batch = RowsInBatchOrder();
  samples->sequence_index.resize(rows);
  samples->rows.resize(rows);
  for (size_t i = 0; i < rows; ++i) {
    const int row = by_batch[i];
    const int32_t slot = batch[row_sequence_[row]].slot;
    SampleResult& out = samples->rows[i];
    samples->sequence_index[i] = row_sequence_[row];
    out.token = inputs_->sampled_token(row);
    out.logprob = inputs_->sampled_logprob(row);
    out.top_logprobs.clear();
    const int top = sampling_.params(slot).num_logprobs;
    for (int k = 0; k < top; ++k) {
      out.top_logprobs.push_back({.token = inputs_->top_ids(row)[k],
                                  .logprob = inputs_->top_logprobs(row)[k]});
    }
    sampling_.Record(slot, out.token);
  }
}

absl::Status CudaModelRunner::Forward(std::span<const SequenceWork> batch, StepLogits* logits) {
  TESSERA_RETURN_IF_ERROR(state_error_);
  TESSERA_RETURN_IF_ERROR(Validate(batch, /*sampling=*/false));
  LayOut(batch, static_cast<int>(batch.size()), /*sampling=*/false, /*in_graph=*/false);
  TESSERA_RETURN_IF_ERROR(inputs_->Upload());
  // The pass advances the batch's recurrent state; Forward leaves it as it found it.
  TESSERA_RETURN_IF_ERROR(SaveStates(batch));
  TESSERA_RETURN_IF_ERROR(EnqueueStep(/*sample=*/false));
  TESSERA_RETURN_IF_ERROR(RestoreStates(batch));
  const size_t rows = row_sequence_.size();
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  device_logits_.resize(rows * vocab);
  if (rows > 0) {
    TESSERA_RETURN_IF_ERROR(runtime_->CopyToHost(device_logits_.data(), ops_->logits(),
                                                 device_logits_.size() * sizeof(float)));
  }
  TESSERA_RETURN_IF_ERROR(runtime_->Synchronize());
  const std::vector<int32_t>& by_batch = RowsInBatchOrder();
  logits->vocab_size = config_.vocab_size;
  logits->sequence_index.resize(rows);
  logits->values.resize(rows * vocab);
  for (size_t i = 0; i < rows; ++i) {
    logits->sequence_index[i] = row_sequence_[by_batch[i]];
    std::copy_n(device_logits_.begin() + static_cast<std::ptrdiff_t>(by_batch[i] * vocab), vocab,
                logits->values.begin() + static_cast<std::ptrdiff_t>(i * vocab));
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker
