// A multi-producer queue of events for one consumer thread (the engine loop). Producers (RPC
// handlers, the worker connection thread) Push; the consumer takes everything queued at once.
//
// Threading: Push from any thread; PopAll from the one consumer thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

namespace tessera::router {

template <typename Event>
class EventQueue {
 public:
  void Push(Event event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_one();
  }

  // Moves every queued event into `out` (appending). Waits until one arrives or `deadline`
  // passes when the queue is empty and `wait` is set.
  void PopAll(bool wait, std::chrono::steady_clock::time_point deadline, std::deque<Event>* out) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wait) ready_.wait_until(lock, deadline, [this] { return !events_.empty(); });
    while (!events_.empty()) {
      out->push_back(std::move(events_.front()));
      events_.pop_front();
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
};

}  // namespace tessera::router
