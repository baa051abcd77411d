// GrammarPreparer: has the worker compile guided requests' grammars (Worker.PrepareGrammar)
// before the engine sees the requests, on its own threads — never on the engine thread (which
// would stall every request) nor on a client's gRPC callback or HTTP handler thread (which must
// not block). A compile can take a second for a large JSON schema (docs/perf/structured.md).
//
// Bounded: kPrepareThreads compiles in flight (the worker itself runs at most two at once) and at
// most kMaxPendingPrepares waiting; past that Enqueue refuses and the request is answered
// RESOURCE_EXHAUSTED at once.
//
// Ownership: owned by the engine; borrows its WorkerClient. Threading: Enqueue from any thread;
// `done` runs on a preparer thread (or, for tasks still queued at Stop, on the stopping thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "tessera/worker/v1/worker.pb.h"

namespace tessera::router {

class WorkerClient;

inline constexpr int kPrepareThreads = 2;
// How long one compile may take before the request is refused (DEADLINE_EXCEEDED).
inline constexpr std::chrono::milliseconds kGrammarTimeout{60000};
inline constexpr size_t kMaxPendingPrepares = 64;

class GrammarPreparer {
 public:
  using Done = std::function<void(absl::Status)>;

  explicit GrammarPreparer(WorkerClient* worker);
  ~GrammarPreparer();  // Stop()
  GrammarPreparer(const GrammarPreparer&) = delete;
  GrammarPreparer& operator=(const GrammarPreparer&) = delete;

  // Queues `grammar` for the worker; `done` gets the worker's answer. False (and `done` is not
  // called) when kMaxPendingPrepares are already waiting.
  bool Enqueue(::tessera::worker::v1::Grammar grammar, Done done);
  // Joins the threads; tasks still queued get UNAVAILABLE.
  void Stop();

 private:
  struct Task {
    ::tessera::worker::v1::Grammar grammar;
    Done done;
  };
  void Run();

  WorkerClient* const worker_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Task> tasks_;  // mutex_
  bool stopping_ = false;   // mutex_
  std::vector<std::thread> threads_;
};

}  // namespace tessera::router
