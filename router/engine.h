// The router's engine: one thread that owns the scheduler, the per-request output state and the
// conversation with the worker. RPC handlers reach it only through Submit/Cancel (an event
// queue); the worker connection thread feeds it results the same way (DESIGN.md §1, §3).
//
// Each loop turn: take queued events (new requests, cancellations, step results, worker
// connected/lost), then plan steps while fewer than two plans are unanswered — plan N+1 goes out
// before result N arrives, so the gRPC hop overlaps the worker's compute.
//
// Metrics: the engine thread reports queues, KV use, steps and every request's lifecycle to a
// RouterMetrics (router_metrics.h).
//
// Threading: the engine thread runs Loop; Submit, Cancel, BeginDrain, limits() and stats() are
// safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "router/event_queue.h"
#include "router/grammar_preparer.h"
#include "router/model_frontend.h"
#include "router/request_builder.h"
#include "router/request_engine.h"
#include "router/request_output.h"
#include "router/response_sink.h"
#include "router/router_log.h"
#include "router/router_metrics.h"
#include "router/scheduler.h"
#include "router/step_recorder.h"
#include "router/worker_client.h"

namespace tessera::router {

struct EngineConfig {
  std::string worker_address;
  std::string worker_secret;           // the router⇄worker shared secret; "" = none
  int max_num_batched_tokens = 2048;
  int max_num_seqs = 256;              // capped by the worker's slots
  int max_waiting = 1024;              // waiting-queue capacity (RESOURCE_EXHAUSTED beyond)
  // KV growth reserved at admission (SchedulerConfig::reserve_horizon_tokens;
  // --kv-reserve-horizon).
  int reserve_horizon_tokens = 64;
  bool enable_prefix_cache = true;     // --no-prefix-cache turns it off
  // The prefix cache's block hashes published for routing (an EngineGroup's engines); off, the
  // cache does no extra work.
  bool publish_prefixes = false;
  // Step records for --trace-steps and the web console's feed (borrowed; outlives the engine;
  // engine thread only); null = neither.
  StepRecorder* step_recorder = nullptr;
  // A request whose client has read nothing for this long while its output is backlogged is
  // cancelled with DEADLINE_EXCEEDED (--stream-stall-timeout).
  std::chrono::milliseconds stream_stall_timeout{60000};
  // A request not yet scheduled this long after arrival fails with RESOURCE_EXHAUSTED
  // (--max-queue-time); 0 = no limit.
  std::chrono::milliseconds max_queue_time{0};
  // Operational log (router_log.h); null = none.
  std::shared_ptr<spdlog::logger> log = nullptr;
  // A preemption_storm warning when at least this many preemptions happen within one window
  // (--preemption-storm-threshold, --preemption-storm-window-s).
  int preemption_storm_threshold = 50;
  std::chrono::milliseconds preemption_storm_window{10000};
  std::chrono::milliseconds reconnect_backoff{100};
  std::chrono::milliseconds max_reconnect_backoff{2000};
};

class Engine : public RequestEngine {
 public:
  // `metrics` (borrowed, must outlive the engine) receives the router's metrics; null = the
  // engine keeps its own, unexported ones.
  Engine(EngineConfig config, const ModelFrontend* model, RouterMetrics* metrics = nullptr);
  ~Engine() override;  // Stop()

  void Start() override;
  void Stop() override;

  // Queues a validated request; every outcome (tokens, errors such as a full queue) reaches the
  // sink. A request with a grammar first has the worker compile it, off this thread
  // (grammar_preparer.h); a grammar the worker refuses closes the sink with its error. Returns the engine's id for Cancel. At `deadline` (the client's gRPC deadline) a
  // request not finished yet is cancelled with DEADLINE_EXCEEDED and its KV freed, whether it
  // waits or runs (checked every loop turn, at least every 100 ms).
  uint64_t Submit(ValidatedRequest request, std::shared_ptr<ResponseSink> sink,
                  std::optional<std::chrono::steady_clock::time_point> deadline =
                      std::nullopt) override;
  void Cancel(uint64_t id) override;
  // Stop admitting (new requests get UNAVAILABLE); requests in flight continue. After
  // `deadline` the remaining ones are cancelled.
  void BeginDrain(std::chrono::steady_clock::time_point deadline) override;
  // True once draining and no request is left.
  bool Drained() const override { return drained_.load(); }

  // The worker's description; empty until a worker has connected.
  std::optional<wv1::DescribeResponse> worker() const override;
  bool serving() const override { return connected_.load() && !draining_.load(); }
  EngineStats stats() const override;
  // This engine's worker (index 0).
  std::vector<WorkerStatus> workers() const override;
  // Routing (engine_group.h), any thread: the hashes of the blocks this engine's prefix cache
  // holds, and its block size (0 while no worker is connected, or the cache is off or does not
  // publish: EngineConfig::publish_prefixes).
  const PublishedPrefixes& published_prefixes() const { return published_prefixes_; }
  int32_t prefix_block_size() const { return block_size_.load(); }

 private:
  struct NewRequest {
    uint64_t id;
    ValidatedRequest request;
    std::shared_ptr<ResponseSink> sink;
    std::chrono::steady_clock::time_point arrival;
    std::optional<std::chrono::steady_clock::time_point> deadline;
  };
  struct CancelRequest { uint64_t id; };
  struct ResumeRequest { uint64_t id; };  // its client read the backlog down
  struct WorkerConnected { uint64_t epoch; wv1::DescribeResponse description; };
  struct WorkerResult { uint64_t epoch; wv1::StepResult result; };
  struct WorkerLost { uint64_t epoch; absl::Status status; };
  struct Drain { std::chrono::steady_clock::time_point deadline; };
  struct Shutdown {};
  using Event = std::variant<NewRequest, CancelRequest, ResumeRequest, WorkerConnected,
                             WorkerResult, WorkerLost, Drain, Shutdown>;

  // A plan sent and not yet answered: which request each sampled token belongs to.
  struct InFlightStep {
    uint64_t step = 0;
    std::vector<uint64_t> sampling_requests;
    std::chrono::steady_clock::time_point sent;
  };

  void Loop();
  void Handle(Event& event);
  void HandleNew(NewRequest& event);
  void HandleCancel(const CancelRequest& event);
  // Backpressure (issue 15): pause a request whose sink is backlogged, resume it when the client
  // has read, cancel it when the client read nothing for stream_stall_timeout.
  void PauseIfBacklogged(uint64_t id, RequestOutput& output);
  void HandleResume(const ResumeRequest& event);
  void CheckStalls(std::chrono::steady_clock::time_point now);
  // Fails requests waiting longer than max_queue_time (checked at most every 100 ms).
  void CheckQueueTimes(std::chrono::steady_clock::time_point now);
  // Cancels requests whose client deadline passed (DEADLINE_EXCEEDED).
  void CheckDeadlines(std::chrono::steady_clock::time_point now);
  void HandleConnected(WorkerConnected& event);
  // A worker the router cannot serve with stays unused: the reason is logged and given to
  // every request until a usable worker connects.
  void RefuseWorker(const wv1::DescribeResponse& d, std::string reason);
  void HandleResult(WorkerResult& event);
  void HandleLost(const WorkerLost& event);
  // Drops the current worker stream after a malformed result; the client redials.
  void AbandonWorker(const std::string& why);
  void ApplySampled(uint64_t request_id, const wv1::SampledToken& sampled);
  // Plans and sends steps while fewer than two are unanswered. True when one was sent.
  bool SendPlans();
  void BuildPlan(const ScheduledStep& step, wv1::StepPlan* plan, InFlightStep* in_flight);
  void SetGrammar(const ValidatedRequest& request, wv1::Grammar* grammar) const;
  void SubmitAfterPrepare(NewRequest event);
  // The client's request_id, or the engine id when the client gave none (for the step trace).
  std::string RequestName(uint64_t id) const;
  void FailAll(const absl::Status& status);
  void CheckDrain(std::chrono::steady_clock::time_point now);
  void PublishStats();
  // Log helpers (engine thread): a rate-limited request_rejected line, the preemption window.
  void LogRejected(const absl::Status& status);
  void CheckPreemptionStorm(int64_t total_preemptions, std::chrono::steady_clock::time_point now);

  const EngineConfig config_;
  const ModelFrontend* model_;
  std::unique_ptr<RouterMetrics> owned_metrics_;  // when none was lent
  RouterMetrics* metrics_;                         // never null; engine thread only
  EventQueue<Event> events_;
  std::unique_ptr<WorkerClient> worker_client_;
  std::unique_ptr<GrammarPreparer> preparer_;  // after worker_client_: stopped before it
  // Guided requests whose grammar is being compiled: id -> cancelled by the client meanwhile.
  std::mutex preparing_mutex_;
  absl::flat_hash_map<uint64_t, bool> preparing_;
  std::thread thread_;
  std::atomic<uint64_t> next_id_{1};

  // Engine-thread state.
  std::unique_ptr<Scheduler> scheduler_;   // null while no worker is connected
  absl::flat_hash_map<uint64_t, std::unique_ptr<RequestOutput>> requests_;
  // Paused requests (backpressure) and when each was paused; entries of ended requests are
  // dropped by CheckStalls.
  absl::flat_hash_map<uint64_t, std::chrono::steady_clock::time_point> paused_;
  // Client deadlines, earliest first (entries of ended requests are skipped when they come up).
  using Deadline = std::pair<std::chrono::steady_clock::time_point, uint64_t>;
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>> deadlines_;
  std::deque<InFlightStep> in_flight_;
  ScheduledStep step_;                 // reused by every Schedule() call
  uint64_t epoch_ = 0;
  uint64_t next_step_ = 1;            // per worker stream
  uint64_t steps_sent_ = 0;           // since start
  bool stopping_ = false;
  std::optional<std::chrono::steady_clock::time_point> drain_deadline_;
  std::chrono::steady_clock::time_point last_queue_check_{};
  std::shared_ptr<spdlog::logger> log_;
  int num_connections_ = 0;                 // worker connections so far (restored when > 0)
  std::chrono::steady_clock::time_point last_rejection_log_{};
  int64_t rejections_unlogged_ = 0;
  std::chrono::steady_clock::time_point storm_window_start_{};
  int64_t storm_window_base_ = 0;          // scheduler preemptions at the window's start
  bool drain_logged_ = false;

  // Shared with other threads.
  PublishedPrefixes published_prefixes_;  // written by the scheduler's prefix cache
  std::atomic<int32_t> block_size_{0};
  std::atomic<bool> connected_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> drained_{false};
  mutable std::mutex shared_mutex_;
  std::optional<wv1::DescribeResponse> worker_;   // guarded by shared_mutex_
  std::vector<int32_t> eos_token_ids_;            // the connected worker's; engine thread only
  std::string worker_unusable_;  // why the last worker was refused ("" if none); engine thread
  EngineStats stats_;                              // guarded by shared_mutex_
};

}  // namespace tessera::router
