// The router's connection to one worker: Describe, then the Run stream of step plans/results.
//
// A connection thread owned by this class dials the worker, calls Describe, opens Run, waits
// until the worker accepted the stream (common/util/worker_handshake.h: a worker serving another
// router, or refusing our secret, does not count as connected) and then reads results until the
// stream breaks; it reports each of those through the callbacks and
// redials with exponential backoff. Every report carries the connection's epoch (1, 2, ...), so
// the engine can ignore results of a stream it already gave up on.
//
// Threading: callbacks run on the connection thread (they should only enqueue). Send may be
// called from one other thread (the engine loop); it is safe against the connection thread
// breaking or replacing the stream.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "tessera/worker/v1/worker.grpc.pb.h"

namespace tessera::router {

namespace wv1 = ::tessera::worker::v1;

struct WorkerClientConfig {
  std::string address;                                   // host:port
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{2000};
  std::chrono::milliseconds describe_timeout{5000};
  std::string secret;  // presented as `authorization: Bearer <secret>`; "" = none
};

struct WorkerClientCallbacks {
  std::function<void(uint64_t epoch, wv1::DescribeResponse)> on_connected;
  std::function<void(uint64_t epoch, wv1::StepResult)> on_result;
  std::function<void(uint64_t epoch, absl::Status)> on_lost;   // only after on_connected
};

class WorkerClient {
 public:
  WorkerClient(WorkerClientConfig config, WorkerClientCallbacks callbacks);
  ~WorkerClient();  // Stop()
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  void Start();
  // Closes the stream (the worker drops every slot) and joins the connection thread.
  void Stop();

  // Writes a plan on the stream of `epoch`. False when that stream is gone (the engine then
  // waits for on_lost / on_connected).
  bool Send(uint64_t epoch, const wv1::StepPlan& plan);
  // Cancels the stream of `epoch` (if it is still the live one); the connection thread then
  // reports on_lost and redials.
  void Abandon(uint64_t epoch);
  // The worker's PrepareGrammar (worker.proto), on the caller's thread with its own channel:
  // compiles a guided request's grammar before the request is scheduled. The worker's status
  // (INVALID_ARGUMENT for a grammar that does not compile; UNAVAILABLE / DEADLINE_EXCEEDED when
  // it cannot answer in `timeout`). Any thread.
  absl::Status PrepareGrammar(const wv1::Grammar& grammar, std::chrono::milliseconds timeout);

 private:
  struct Stream;
  void ConnectionLoop();
  // Dials and describes; null when the worker is unreachable or stopping.
  std::unique_ptr<Stream> Connect(wv1::DescribeResponse* description);
  // Waits for the worker's acceptance of the Run stream; false (the call finished) on refusal.
  bool WaitUntilAccepted(Stream& stream);
  void ReadUntilBroken(Stream& stream, uint64_t epoch);
  void SleepBackoff(std::chrono::milliseconds delay);

  const WorkerClientConfig config_;
  std::mutex prepare_mutex_;
  std::shared_ptr<grpc::Channel> prepare_channel_;  // dialled on first use; prepare_mutex_
  const WorkerClientCallbacks callbacks_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  bool refused_reported_ = false;    // connection thread only
  bool not_accepted_reported_ = false;  // connection thread only

  std::mutex mutex_;  // guards stream_, pending_, epoch_ and the Write/Finish ordering
  std::condition_variable wake_;     // interrupts the backoff sleep on Stop
  Stream* stream_ = nullptr;         // the live stream, owned by the connection thread
  Stream* pending_ = nullptr;        // a stream awaiting the worker's acceptance (for Stop)
  uint64_t epoch_ = 0;
};

}  // namespace tessera::router
