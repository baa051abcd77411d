#include "worker/cuda/step_pieces.h"

#include "absl/strings/str_cat.h"
#include "common/util/check.h"
#include "common/util/status_macros.h"

namespace tessera::worker {

StepPieces::StepPieces(device::DeviceRuntime* runtime) : runtime_(runtime) {
  TESSERA_CHECK(runtime_ != nullptr, "StepPieces needs a device runtime");
}

absl::Status StepPieces::Begin(Mode mode, std::span<const device::GraphHandle> graphs) {
  TESSERA_CHECK(mode_ == Mode::kWhole, "StepPieces::Begin: the previous pass was not finished");
  TESSERA_CHECK(mode == Mode::kReplay || graphs.empty(),
                "StepPieces::Begin: graphs are replayed in kReplay only");
  mode_ = mode;
  after_tail_ = false;
  captured_.clear();
  replaying_.assign(graphs.begin(), graphs.end());
  next_ = 0;
  if (mode_ != Mode::kCapture) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(runtime_->BeginCapture());
  capture_open_ = true;
  return absl::OkStatus();
}

bool StepPieces::TokenWork() const {
  switch (mode_) {
    case Mode::kWhole: return true;
    case Mode::kWarmUp:
    case Mode::kCapture: return !after_tail_;
    case Mode::kReplay: return after_tail_;
  }
  return true;
}

absl::StatusOr<bool> StepPieces::SequenceWork(bool tail) {
  if (mode_ == Mode::kWhole) return true;
  if (after_tail_) return mode_ == Mode::kReplay;
  after_tail_ = tail;
  switch (mode_) {
    case Mode::kWhole: return true;
    case Mode::kWarmUp: return false;
    case Mode::kCapture: {
      capture_open_ = false;
      TESSERA_ASSIGN_OR_RETURN(device::GraphHandle graph, runtime_->EndCapture());
      captured_.push_back(graph);
      if (!tail) {
        TESSERA_RETURN_IF_ERROR(runtime_->BeginCapture());
        capture_open_ = true;
      }
      return false;
    }
    case Mode::kReplay:
      if (next_ >= replaying_.size()) {
        return absl::InternalError(absl::StrCat("StepPieces: a replay reached stretch ", next_ + 1,
                                                " of a step captured with ", replaying_.size()));
      }
      TESSERA_RETURN_IF_ERROR(runtime_->Replay(replaying_[next_++]));
      return true;
  }
  return true;
}

absl::StatusOr<std::vector<device::GraphHandle>> StepPieces::Finish() {
  const Mode mode = mode_;
  mode_ = Mode::kWhole;
  if (mode == Mode::kCapture && capture_open_) {
    capture_open_ = false;
    TESSERA_ASSIGN_OR_RETURN(device::GraphHandle graph, runtime_->EndCapture());
    captured_.push_back(graph);
  }
  if (mode == Mode::kReplay && next_ != replaying_.size()) {
    return absl::InternalError(absl::StrCat("StepPieces: a replay ran ", next_, " of ",
                                            replaying_.size(), " stretches"));
  }
  return std::move(captured_);
}

}  // namespace tessera::worker
