// StepRecorder: one engine's step records. One JSON record per step the engine sent: who was in
// the batch, how many tokens each request got, prefill chunk or decode, and what the step cost
// (the router's Schedule(), the worker's host / device / total time, the router's plan-sent ->
// result-received round trip). Each record goes, as one line, to the batch-composition trace
// (`tessera-router --trace-steps FILE`; tools/trace/plot_steps.py renders it) and/or to the web
// console's feed (console/step_feed.h) while a browser watches. With neither a file nor a
// watcher, OnPlanSent and OnResult return at once.
//
// Why the writer holds steps back: the engine sends plan N+1 before result N arrives (DESIGN.md
// §2), so a step's line is complete only when its result comes back. OnPlanSent keeps the step's
// batch; OnResult joins the timings and writes the line. Results come in plan order, so a result
// for step N also closes every older pending step as unanswered (the stream broke in between);
// a step that never gets a result (stream lost, Close()) is written with null result fields.
//
// Line schema (keys always present, in this order; `*_s` in seconds, null where unknown):
//   {"step":7,"sent_s":0.153,"batch_size":2,"num_tokens":65,"num_prefill_tokens":64,
//    "num_dropped_slots":0,"schedule_s":1.2e-05,
//    "requests":[{"id":"a","tokens":1,"kind":"decode","start":130,"samples":true,"new":false},
//                {"id":"b","tokens":64,"kind":"prefill","start":0,"samples":false,"new":true}],
//    "host_s":0.0004,"device_s":0.031,"sample_s":0.0001,"total_s":0.032,"graph_replayed":false,
//    "round_trip_s":0.034}
// `step` is the protocol's step number (it restarts at 1 on a new worker stream); `sent_s` is
// counted from the recorder's start. Requests appear in plan order (running first, then newly
// admitted). A record begun while nobody watched (no file) is not made later: a watcher that
// arrives sees the steps planned from then on.
//
// Durability: each line is flushed to the kernel when written, so a trace survives kill -9 of
// the router except for the steps still pending.
//
// Threading: not thread-safe. The engine thread calls OnPlanSent / OnResult; main opens the
// writer before the engine starts and closes it after the engine stopped.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "router/console/step_feed.h"
#include "router/scheduled_step.h"
#include "tessera/worker/v1/worker.pb.h"

namespace tessera::router {

class StepRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  // Maps an engine request id to the name written in the trace (the client's request_id when it
  // gave one). Called during OnPlanSent only: a request may be gone when its result arrives.
  using RequestNamer = std::function<std::string(uint64_t)>;

  // Records to `path` (created or truncated). `start` is time zero of every `sent_s`.
  static absl::StatusOr<std::unique_ptr<StepRecorder>> Open(
      const std::string& path, Clock::time_point start = Clock::now());
  // Records to no file (the console's feed alone, once attached).
  static std::unique_ptr<StepRecorder> WithoutFile(Clock::time_point start = Clock::now());

  // Also publish each record to `feed` (borrowed; outlives the recorder) as worker `worker`'s,
  // while it is watched. Call before the engine starts.
  void AttachFeed(console::StepFeed* feed, int worker);

  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;
  ~StepRecorder();  // Close()

  // Call after the plan for `step_number` was handed to the worker stream. `schedule_seconds`
  // is how long the Schedule() call that produced `step` took. A step number not above the
  // newest pending one means a new worker stream: the older pending steps are written unanswered.
  void OnPlanSent(uint64_t step_number, const ScheduledStep& step, const RequestNamer& request_name,
                  double schedule_seconds, Clock::time_point sent);

  // Call when the worker's result for `step_number` arrived. A result for a step that is not
  // pending (a stale stream) is ignored.
  void OnResult(uint64_t step_number, const ::tessera::worker::v1::StepResult& result,
                Clock::time_point received);

  // Writes the pending steps with null result fields and closes the file. Idempotent.
  void Close();

  // The first write error (the trace stops at it), OK otherwise.
  const absl::Status& status() const { return status_; }
  uint64_t lines_written() const { return lines_written_; }
  size_t num_pending() const { return pending_.size(); }

 private:
  struct RequestEntry {
    std::string name;
    int32_t num_tokens = 0;
    int32_t start_position = 0;
    bool is_prefill = false;
    bool samples = false;
    bool is_new = false;
  };
  struct PendingStep {
    uint64_t step = 0;
    double sent_seconds = 0;
    double schedule_seconds = 0;
    Clock::time_point sent;
    int32_t num_tokens = 0;
    int32_t num_prefill_tokens = 0;
    int32_t num_dropped_slots = 0;
    std::vector<RequestEntry> requests;
  };

  StepRecorder(std::FILE* file, std::string path, Clock::time_point start);

  // Whether a record made now has anywhere to go.
  bool Recording() const { return file_ != nullptr || (feed_ != nullptr && feed_->watched()); }

  // Writes `step` as one line; `result` null = unanswered (result fields null).
  void Emit(const PendingStep& step, const ::tessera::worker::v1::StepResult* result,
            Clock::time_point received);
  void WriteLine(const std::string& line);
  // Pops and writes (unanswered) every pending step.
  void FlushPendingUnanswered();

  std::FILE* file_;  // null: no file, closed, or after a write error
  console::StepFeed* feed_ = nullptr;
  int feed_worker_ = 0;
  const std::string path_;
  const Clock::time_point start_;
  std::deque<PendingStep> pending_;  // oldest first; at most the engine's plans in flight
  absl::Status status_;
  uint64_t lines_written_ = 0;
};

}  // namespace tessera::router
