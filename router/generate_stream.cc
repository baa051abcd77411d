#include "router/generate_stream.h"

#include "common/util/grpc_status.h"

#include <chrono>
#include <functional>
#include <utility>

namespace tessera::router {

namespace v1 = ::tessera::v1;

class GenerateStream::Sink final : public ResponseSink {
 public:
  explicit Sink(GenerateStream* reactor) : reactor_(reactor) {}

  void Send(v1::GenerateResponse response) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (closed_) return;
    PushLocked(std::move(response));
    PumpLocked();
  }

  bool Backlogged() const override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return queue_.size() >= kMaxUnsentResponses || queued_bytes_ >= kMaxUnsentBytes;
  }

  void NotifyWhenDrained(std::function<void()> on_drained) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    on_drained_ = std::move(on_drained);
    NotifyIfDrainedLocked();
  }

  std::chrono::steady_clock::time_point LastRead() const override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return last_read_;
  }

  void Close(v1::GenerateResponse last, absl::Status status) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (closed_) return;
    closed_ = true;
    if (last.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) PushLocked(std::move(last));
    final_status_ = util::ToGrpcStatus(status);
    PumpLocked();
  }

  void OnWriteDone(bool ok) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    writing_ = false;
    last_read_ = std::chrono::steady_clock::now();
    if (!ok) {
      // The client is gone; OnCancel tells the engine. Nothing more can be written.
      queue_.clear();
      queued_bytes_ = 0;
      closed_ = true;
      final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
    PumpLocked();
  }

  void Detach() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    reactor_ = nullptr;
  }

 private:
  // Starts the next write, or finishes the call once closed and everything was written.
  void PumpLocked() {
    if (reactor_ == nullptr || writing_ || finished_) return;
    if (!queue_.empty()) {
      writing_ = true;
      current_ = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= current_.ByteSizeLong();
      NotifyIfDrainedLocked();
      reactor_->StartWrite(&current_);
      return;
    }
    if (closed_) {
      finished_ = true;
      reactor_->Finish(final_status_);
    }
  }

  void PushLocked(v1::GenerateResponse response) {
    queued_bytes_ += response.ByteSizeLong();
    queue_.push_back(std::move(response));
  }

  // Wakes the engine once the backlog is down to half of both bounds.
  void NotifyIfDrainedLocked() {
    if (!on_drained_ || queue_.size() > kMaxUnsentResponses / 2 ||
        queued_bytes_ > kMaxUnsentBytes / 2) {
      return;
    }
    std::function<void()> on_drained = std::move(on_drained_);
    on_drained_ = nullptr;
    on_drained();  // only queues an engine event
  }

  mutable std::recursive_mutex mutex_;
  GenerateStream* reactor_;
  std::deque<v1::GenerateResponse> queue_;
  size_t queued_bytes_ = 0;  // ByteSizeLong of everything in queue_
  std::function<void()> on_drained_;
  std::chrono::steady_clock::time_point last_read_ = std::chrono::steady_clock::now();
  v1::GenerateResponse current_;   // the message being written (must live until OnWriteDone)
  bool writing_ = false;
  bool closed_ = false;
  bool finished_ = false;
  grpc::Status final_status_;
};

GenerateStream::GenerateStream(RequestEngine* engine, absl::StatusOr<ValidatedRequest> request,
                               std::optional<std::chrono::steady_clock::time_point> deadline)
    : engine_(engine), sink_(std::make_shared<Sink>(this)) {
  if (!request.ok()) {
    sink_->Close({}, request.status());
    return;
  }
  id_ = engine_->Submit(std::move(*request), sink_, deadline);
}

void GenerateStream::OnWriteDone(bool ok) { sink_->OnWriteDone(ok); }

void GenerateStream::OnCancel() {
  if (id_ != 0) engine_->Cancel(id_);
}

void GenerateStream::OnDone() {
  sink_->Detach();
  delete this;
}

}  // namespace tessera::router
