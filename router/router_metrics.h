// RouterMetrics: the router's Prometheus metrics (DESIGN.md §7, prefix `tessera_`) as cached
// prometheus-cpp handles plus small Observe* methods, so the hot path (per token, per step) never
// looks up a label set: every labeled child is created once, here.
//
//   requests_total{status}             counter   finished requests by outcome (RequestOutcome)
//   requests_running, requests_waiting gauge     scheduler queues
//   time_to_first_token_seconds        histogram arrival -> first token          RequestLatency
//   inter_token_latency_seconds        histogram between a request's tokens     StepLatency
//   e2e_request_latency_seconds        histogram arrival -> finish (not rejected) RequestLatency
//   request_queue_time_seconds         histogram arrival -> first scheduled     RequestLatency
//   prompt_tokens_total                counter   prompt tokens of admitted requests
//   generation_tokens_total            counter   tokens delivered (= sum of completion_tokens)
//   prefix_cache_queries_total         counter   tokens looked up at (re)admission (cache on)
//   prefix_cache_hits_total            counter   of those, tokens served from cached blocks
//   prefix_cache_enabled               gauge     1 when prefixes are shared (0: off, or a hybrid
//                                                model's worker without state snapshots)
//   prefix_cache_cold_total{reason}    counter   hybrid models: admissions that ran cold although
//                                                blocks were cached (no_snapshot: none of them
//                                                ended at a state snapshot), and snapshot saves
//                                                skipped (snapshot_pool_full: every id reserved)
//   state_snapshots_saved_total        counter   snapshots the worker was asked to save
//   state_snapshots_evicted_total      counter   snapshots taken back for newer ones (LRU)
//   kv_blocks_used, kv_blocks_capacity gauge     logical KV blocks (null block excluded); DESIGN
//                                                says kv_blocks_total, but a gauge named *_total
//                                                fails `promtool check metrics` (counter suffix)
//   (with options.gateway, ObserveScheduler also reports the queue and KV numbers to the pod-level
//   model-server protocol gauges, gateway_metrics.h, which never carry the worker label)
//   preemptions_total                  counter   recompute preemptions
//   step_tokens                        histogram tokens per planned step        CountBuckets
//   scheduler_seconds                  histogram Schedule() wall time per plan  StepLatency
//   worker_restores_total              counter   worker connections after the first (the
//                                                worker was lost and came back, e.g. restarted
//                                                by `tessera serve`)
//
// Ownership/threading: the process owns one (main) and lends it to the Engine; every Observe*
// is called from the engine thread (directly or through RequestOutput). The registry is read by
// the metrics server's threads; prometheus-cpp handles are thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "router/gateway_metrics.h"
#include "router/scheduled_step.h"
#include "router/scheduler.h"
#include "tessera/worker/v1/worker.pb.h"

namespace tessera::router {

// The `status` label of requests_total: a finish reason, or why the request never ran.
enum class RequestOutcome {
  kStop,       // a stop string or stop token id
  kEos,        // the model's end-of-sequence token
  kLength,     // max_tokens
  kCancelled,  // the client cancelled, or the router shut down before it finished
  kError,      // failed after admission: worker lost, a bad sampled token, a scheduler failure
  kRejected,   // refused at admission: queue full, no worker, draining, does not fit
};
inline constexpr size_t kNumRequestOutcomes = 6;

// "stop", "eos", "length", "cancelled", "error", "rejected".
std::string_view RequestOutcomeLabel(RequestOutcome outcome);

// True when the worker can share prefix blocks: it advertises the "prefix_cache" feature (a
// hybrid model's worker does not: its linear-attention state has no block-boundary snapshot yet,
// DESIGN.md §4).
bool WorkerSharesPrefixes(const ::tessera::worker::v1::DescribeResponse& worker);

struct RouterMetricsOptions {
  int max_num_batched_tokens = 2048;  // the top step_tokens bucket; >= 1
  // Data parallel (several workers, engine_group.h): every series of this engine's metrics
  // carries worker="<this>"; "" = no label (one worker).
  std::string worker;
  // The pod-level gauges (gateway_metrics.h) this engine's queue and KV numbers add to, as engine
  // `gateway_engine`; null = none (tests, the LocalAI backend). Outlives this object.
  GatewayMetrics* gateway = nullptr;
  size_t gateway_engine = 0;
};

class RouterMetrics {
 public:
  // Registers every family in `registry` (kept alive by this object).
  RouterMetrics(std::shared_ptr<prometheus::Registry> registry,
                const RouterMetricsOptions& options);

  RouterMetrics(const RouterMetrics&) = delete;
  RouterMetrics& operator=(const RouterMetrics&) = delete;

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // Request lifecycle. First scheduling of a request (not a re-admission after preemption).
  void ObserveAdmitted(double queue_seconds, int64_t num_prompt_tokens);
  // One token delivered to the client; `seconds` is the time to first token when `first`, else
  // the time since the request's previous token.
  void ObserveToken(bool first, double seconds);
  // A request that ran ended (any outcome but kRejected).
  void ObserveFinished(RequestOutcome outcome, double e2e_seconds);
  // A request refused before it ran (no latency observed).
  void ObserveRejected();
  // The worker connected again after a loss.
  void ObserveWorkerRestored() { worker_restores_->Increment(); }

  // After every Schedule() call: preemptions always; for a plan that goes out, the scheduling
  // time and (unless drop-only) its token count.
  void ObserveStep(const ScheduledStep& step, double schedule_seconds);
  // Queue and KV gauges, and the prefix-cache counters (from the scheduler's running totals);
  // `stats` null when no worker is connected (gauges 0).
  void ObserveScheduler(const SchedulerStats* stats);
  void SetPrefixCacheEnabled(bool enabled) { prefix_cache_enabled_->Set(enabled ? 1 : 0); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::array<prometheus::Counter*, kNumRequestOutcomes> requests_total_{};
  prometheus::Gauge* requests_running_ = nullptr;
  prometheus::Gauge* requests_waiting_ = nullptr;
  prometheus::Histogram* time_to_first_token_ = nullptr;
  prometheus::Histogram* inter_token_latency_ = nullptr;
  prometheus::Histogram* e2e_request_latency_ = nullptr;
  prometheus::Histogram* request_queue_time_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Counter* prefix_cache_queries_ = nullptr;
  prometheus::Counter* prefix_cache_hits_ = nullptr;
  prometheus::Gauge* prefix_cache_enabled_ = nullptr;
  prometheus::Counter* prefix_cold_no_snapshot_ = nullptr;
  prometheus::Counter* prefix_cold_pool_full_ = nullptr;
  prometheus::Counter* snapshots_saved_ = nullptr;
  prometheus::Counter* snapshots_evicted_ = nullptr;
  prometheus::Gauge* kv_blocks_used_ = nullptr;
  prometheus::Gauge* kv_blocks_capacity_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  prometheus::Histogram* step_tokens_ = nullptr;
  prometheus::Histogram* scheduler_seconds_ = nullptr;
  prometheus::Counter* worker_restores_ = nullptr;
  GatewayMetrics* gateway_ = nullptr;
  size_t gateway_engine_ = 0;

  // Adds what `total` (a scheduler running total) gained since *last_seen to `counter`.
  static void AddSince(int64_t total, int64_t* last_seen, prometheus::Counter* counter);
  int64_t last_prefix_queries_ = 0;  // scheduler totals already counted
  int64_t last_prefix_hits_ = 0;
  int64_t last_cold_no_snapshot_ = 0;
  int64_t last_cold_pool_full_ = 0;
  int64_t last_snapshots_saved_ = 0;
  int64_t last_snapshots_evicted_ = 0;
};

}  // namespace tessera::router
