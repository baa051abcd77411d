#include "router/completion_job.h"

#include <utility>

namespace tessera::router {

namespace v1 = ::tessera::v1;

class CompletionJob::ChoiceSink final : public ResponseSink {
 public:
  ChoiceSink(std::shared_ptr<CompletionJob> job, int choice)
      : job_(std::move(job)), choice_(choice) {}

  void Send(v1::GenerateResponse response) override {
    job_->Push({.choice = choice_, .response = std::move(response)});
  }

  bool Backlogged() const override { return job_->Backlogged(choice_); }
  void NotifyWhenDrained(std::function<void()> on_drained) override {
    job_->NotifyWhenDrained(choice_, std::move(on_drained));
  }
  std::chrono::steady_clock::time_point LastRead() const override {
    return job_->LastTaken(choice_);
  }

  void Close(v1::GenerateResponse last, absl::Status status) override {
    job_->Push({.choice = choice_,
                .response = std::move(last),
                .closed = true,
                .status = std::move(status)});
  }

 private:
  std::shared_ptr<CompletionJob> job_;
  int choice_;
};

std::shared_ptr<CompletionJob> CompletionJob::Submit(RequestEngine* engine,
                                                     std::vector<ValidatedRequest> requests) {
  std::shared_ptr<CompletionJob> job(new CompletionJob(engine));
  const int n = static_cast<int>(requests.size());
  {
    std::lock_guard<std::mutex> lock(job->mutex_);
    job->closed_.assign(n, false);
    job->backlog_.resize(n);
    job->open_choices_ = n;
  }
  for (int i = 0; i < n; ++i) {
    job->engine_ids_.push_back(
        engine->Submit(std::move(requests[i]), std::make_shared<ChoiceSink>(job, i)));
  }
  return job;
}

void CompletionJob::Push(JobEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_[event.choice]) return;  // the engine closes a choice once; be safe anyway
    if (event.closed) {
      closed_[event.choice] = true;
      --open_choices_;
    }
    Backlog& backlog = backlog_[event.choice];
    ++backlog.events;
    backlog.bytes += event.response.ByteSizeLong();
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

bool CompletionJob::Backlogged(int choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Backlog& backlog = backlog_[choice];
  return backlog.events >= kMaxUnsentResponses || backlog.bytes >= kMaxUnsentBytes;
}

void CompletionJob::NotifyWhenDrained(int choice, std::function<void()> on_drained) {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    backlog_[choice].on_drained = std::move(on_drained);
    NotifyIfDrainedLocked(choice, &calls);
  }
  for (auto& call : calls) call();
}

std::chrono::steady_clock::time_point CompletionJob::LastTaken(int choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  return backlog_[choice].last_taken;
}

void CompletionJob::NotifyIfDrainedLocked(int choice,
                                          std::vector<std::function<void()>>* calls) {
  Backlog& backlog = backlog_[choice];
  if (!backlog.on_drained || backlog.events > kMaxUnsentResponses / 2 ||
      backlog.bytes > kMaxUnsentBytes / 2) {
    return;
  }
  calls->push_back(std::move(backlog.on_drained));
  backlog.on_drained = nullptr;
}

std::optional<JobEvent> CompletionJob::Next(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                  [this] { return !events_.empty() || open_choices_ == 0; });
  if (events_.empty()) return std::nullopt;
  JobEvent event = std::move(events_.front());
  events_.pop_front();
  Backlog& backlog = backlog_[event.choice];
  --backlog.events;
  backlog.bytes -= event.response.ByteSizeLong();
  backlog.last_taken = std::chrono::steady_clock::now();
  std::vector<std::function<void()>> calls;
  NotifyIfDrainedLocked(event.choice, &calls);
  lock.unlock();
  for (auto& call : calls) call();
  return event;
}

bool CompletionJob::Finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_choices_ == 0 && events_.empty();
}

void CompletionJob::Cancel() {
  if (cancelled_) return;
  cancelled_ = true;
  std::vector<uint64_t> open;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < engine_ids_.size(); ++i) {
      if (!closed_[i]) open.push_back(engine_ids_[i]);
    }
  }
  for (uint64_t id : open) engine_->Cancel(id);
}

}  // namespace tessera::router
