// One client request's engine requests (one per choice, e.g. OpenAI's `n`) and the events they
// produce, for a handler thread (HTTP, LocalAI gRPC) to consume. Each choice gets a ResponseSink
// that only queues under a short mutex, so the engine thread never waits for a client (DESIGN.md
// §1); the handler thread waits on the queue and does all the encoding and socket writing.
//
// Threading: the sinks are called from the engine thread; Next, Cancel and Finished from the one
// handler thread that owns the job. The job is shared with the sinks (the engine may hold them
// a little longer than the handler holds the job).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "router/request_engine.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router {

struct JobEvent {
  int choice = 0;
  ::tessera::v1::GenerateResponse response;  // text/tokens since the last event of this choice
  bool closed = false;                       // the choice's last event
  absl::Status status = {};                  // when closed: how it ended
};

class CompletionJob : public std::enable_shared_from_this<CompletionJob> {
 public:
  // Submits every request (choice i = requests[i]) to `engine`.
  static std::shared_ptr<CompletionJob> Submit(RequestEngine* engine,
                                               std::vector<ValidatedRequest> requests);

  // The next event, waiting up to `timeout`; nullopt when none came in time or every choice has
  // closed and every event was taken.
  std::optional<JobEvent> Next(absl::Duration timeout);
  // True once every choice has closed and every event was taken.
  bool Finished();
  // Cancels every choice that has not closed (a client that went away). Idempotent.
  void Cancel();

 private:
  class ChoiceSink;
  explicit CompletionJob(RequestEngine* engine) : engine_(engine) {}
  void Push(JobEvent event);
  // Backpressure per choice (response_sink.h bounds): events the handler thread has not taken.
  // A handler blocked writing to a client that does not read stops taking them.
  bool Backlogged(int choice);
  void NotifyWhenDrained(int choice, std::function<void()> on_drained);
  std::chrono::steady_clock::time_point LastTaken(int choice);
  void NotifyIfDrainedLocked(int choice, std::vector<std::function<void()>>* calls);

  RequestEngine* engine_;
  std::vector<uint64_t> engine_ids_;  // per choice; set before any sink can be called back
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<JobEvent> events_;  // guarded by mutex_
  std::vector<bool> closed_;     // guarded by mutex_
  int open_choices_ = 0;         // guarded by mutex_
  struct Backlog {
    size_t events = 0;
    size_t bytes = 0;
    std::function<void()> on_drained;
    std::chrono::steady_clock::time_point last_taken = std::chrono::steady_clock::now();
  };
  std::vector<Backlog> backlog_;  // per choice; guarded by mutex_
  bool cancelled_ = false;       // handler thread only
};

}  // namespace tessera::router
