#include "router/grammar_preparer.h"

#include <utility>

#include "router/worker_client.h"

namespace tessera::router {

GrammarPreparer::GrammarPreparer(WorkerClient* worker) : worker_(worker) {
  for (int i = 0; i < kPrepareThreads; ++i) threads_.emplace_back([this] { Run(); });
}

GrammarPreparer::~GrammarPreparer() { Stop(); }

bool GrammarPreparer::Enqueue(::tessera::worker::v1::Grammar grammar, Done done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || tasks_.size() >= kMaxPendingPrepares) return false;
    tasks_.push_back({std::move(grammar), std::move(done)});
  }
  ready_.notify_one();
  return true;
}

void GrammarPreparer::Stop() {
  std::deque<Task> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    left.swap(tasks_);
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
  for (Task& task : left) task.done(absl::UnavailableError("the server is shutting down"));
}

void GrammarPreparer::Run() {
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task.done(worker_->PrepareGrammar(task.grammar, kGrammarTimeout));
  }
}

}  // namespace tessera::router
