// Runs tasks on one long-lived thread (tessera-localai's main thread) for handler threads that
// must not do them themselves: a child process is spawned, polled and reaped by one owner thread,
// and Linux ties its PR_SET_PDEATHSIG to the thread that forked it
// (common/process/child_process.h), so a worker started from a short-lived gRPC thread could be
// killed when that thread ends.
//
// Threading: constructed on the owner thread; Run from any thread (blocks until the task ran; on
// the owner thread itself it runs the task at once); RunPending on the owner thread only.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace tessera::router::localai {

class OwnerThread {
 public:
  OwnerThread() : owner_(std::this_thread::get_id()) {}

  // Runs `task` on the owner thread and waits for it.
  void Run(std::function<void()> task) {
    if (std::this_thread::get_id() == owner_) {
      task();
      return;
    }
    std::packaged_task<void()> packaged(std::move(task));
    std::future<void> done = packaged.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(packaged));
    }
    ready_.notify_one();
    done.get();
  }

  // Owner thread: runs every queued task, waiting up to `wait` for the first.
  void RunPending(absl::Duration wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait_for(lock, absl::ToChronoNanoseconds(wait), [this] { return !tasks_.empty(); });
    while (!tasks_.empty()) {
      std::packaged_task<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

 private:
  const std::thread::id owner_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<void()>> tasks_;
};

}  // namespace tessera::router::localai
