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

std::shared_ptr<CompletionJob> CompletionJob::Submit(Engine* engine,
                                                     std::vector<ValidatedRequest> requests) {
  std::shared_ptr<CompletionJob> job(new CompletionJob(engine));
  const int n = static_cast<int>(requests.size());
  {
    std::lock_guard<std::mutex> lock(job->mutex_);
    job->closed_.assign(n, false);
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
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

std::optional<JobEvent> CompletionJob::Next(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                  [this] { return !events_.empty() || open_choices_ == 0; });
  if (events_.empty()) return std::nullopt;
  JobEvent event = std::move(events_.front());
  events_.pop_front();
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
