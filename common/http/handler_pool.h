// HandlerPool: the threads that run routes which block (a completion waits for its tokens), so
// the HTTP server's I/O thread never does. Work beyond `num_threads` waits in a bounded queue;
// past that, TryPost refuses it and the server answers 503 at once.
//
// Threading: TryPost from any thread; Stop (and the destructor) from the owner, after which
// TryPost refuses. Stop lets queued work run: each task sees its client gone and returns quickly.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::http {

class HandlerPool {
 public:
  HandlerPool(int num_threads, size_t max_queued);
  ~HandlerPool();  // Stop()
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // False (and `task` dropped) when the queue is full or the pool stopped.
  bool TryPost(std::function<void()> task);
  // Runs what is queued, then joins the threads. Idempotent.
  void Stop();

 private:
  void Run();

  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;  // guarded by mutex_
  bool stopping_ = false;                    // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace tessera::http
