#include "router/router_metrics.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/metrics/buckets.h"
#include "common/metrics/series.h"
#include "common/util/check.h"

namespace tessera::router {
namespace {

using metrics::AddCounter;
using metrics::AddGauge;
using metrics::AddHistogram;
using metrics::CountBuckets;
using metrics::RequestLatencyBuckets;
using metrics::StepLatencyBuckets;

}  // namespace

std::string_view RequestOutcomeLabel(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::kStop: return "stop";
    case RequestOutcome::kEos: return "eos";
    case RequestOutcome::kLength: return "length";
    case RequestOutcome::kCancelled: return "cancelled";
    case RequestOutcome::kError: return "error";
    case RequestOutcome::kRejected: return "rejected";
  }
  return "error";
}

bool WorkerSharesPrefixes(const ::tessera::worker::v1::DescribeResponse& worker) {
  return std::find(worker.features().begin(), worker.features().end(), "prefix_cache") !=
         worker.features().end();
}

RouterMetrics::RouterMetrics(std::shared_ptr<prometheus::Registry> registry,
                             const RouterMetricsOptions& options)
    : registry_(std::move(registry)),
      gateway_(options.gateway),
      gateway_engine_(options.gateway_engine) {
  TESSERA_CHECK(registry_ != nullptr, "RouterMetrics needs a registry");
  TESSERA_CHECK(options.max_num_batched_tokens >= 1, "RouterMetrics: max_num_batched_tokens < 1");
  prometheus::Registry& r = *registry_;
  prometheus::Labels base;  // every series' constant labels
  if (!options.worker.empty()) base["worker"] = options.worker;
  const auto with = [&base](std::string name, std::string value) {
    prometheus::Labels labels = base;
    labels[std::move(name)] = std::move(value);
    return labels;
  };
  // Every outcome's series exists from the start (at 0), so rate() and absent() behave.
  auto& requests = prometheus::BuildCounter()
                       .Name("tessera_requests_total")
                       .Help("Requests that ended, by status: a finish reason (stop, eos, length), "
                             "cancelled, error, or rejected at admission")
                       .Register(r);
  for (size_t i = 0; i < kNumRequestOutcomes; ++i) {
    requests_total_[i] = &requests.Add(
        with("status", std::string(RequestOutcomeLabel(static_cast<RequestOutcome>(i)))));
  }
  requests_running_ =
      AddGauge(r, "tessera_requests_running", "Requests holding a worker slot", base);
  requests_waiting_ = AddGauge(r, "tessera_requests_waiting",
                               "Requests queued for admission (new or preempted)", base);
  time_to_first_token_ = AddHistogram(r, "tessera_time_to_first_token_seconds",
                                      "Arrival to first generated token", RequestLatencyBuckets(),
                                      base);
  inter_token_latency_ = AddHistogram(r, "tessera_inter_token_latency_seconds",
                                      "Time between consecutive tokens of a request",
                                      StepLatencyBuckets(), base);
  e2e_request_latency_ = AddHistogram(r, "tessera_e2e_request_latency_seconds",
                                      "Arrival to the end of requests that ran (any outcome)",
                                      RequestLatencyBuckets(), base);
  request_queue_time_ = AddHistogram(r, "tessera_request_queue_time_seconds",
                                     "Arrival to first scheduling", RequestLatencyBuckets(), base);
  prompt_tokens_ = AddCounter(r, "tessera_prompt_tokens_total",
                              "Prompt tokens of admitted requests", base);
  generation_tokens_ = AddCounter(r, "tessera_generation_tokens_total",
                                  "Generated tokens delivered to clients", base);
  prefix_cache_queries_ = AddCounter(r, "tessera_prefix_cache_queries_total",
                                     "Tokens looked up in the prefix cache at (re)admission", base);
  prefix_cache_hits_ = AddCounter(r, "tessera_prefix_cache_hits_total",
                                  "Looked-up tokens served from cached KV blocks", base);
  prefix_cache_enabled_ = AddGauge(r, "tessera_prefix_cache_enabled",
                                   "1 when prefixes are shared; 0 e.g. for hybrid models", base);
  auto& cold = prometheus::BuildCounter()
                   .Name("tessera_prefix_cache_cold_total")
                   .Help("Hybrid models: admissions that ran cold although blocks were cached "
                         "(no_snapshot), and state snapshot saves skipped (snapshot_pool_full)")
                   .Register(r);
  prefix_cold_no_snapshot_ = &cold.Add(with("reason", "no_snapshot"));
  prefix_cold_pool_full_ = &cold.Add(with("reason", "snapshot_pool_full"));
  snapshots_saved_ = AddCounter(r, "tessera_state_snapshots_saved_total",
                                "Recurrent-state snapshots the worker was asked to save", base);
  snapshots_evicted_ = AddCounter(r, "tessera_state_snapshots_evicted_total",
                                  "State snapshots taken back (LRU) for newer ones", base);
  kv_blocks_used_ = AddGauge(r, "tessera_kv_blocks_used", "Logical KV blocks in use", base);
  kv_blocks_capacity_ = AddGauge(r, "tessera_kv_blocks_capacity",
                              "Usable logical KV blocks (0 while no worker is connected)", base);
  preemptions_ = AddCounter(r, "tessera_preemptions_total",
                            "Running requests preempted (blocks freed, recomputed later)", base);
  step_tokens_ = AddHistogram(r, "tessera_step_tokens", "Tokens scheduled per step",
                              CountBuckets(options.max_num_batched_tokens), base);
  scheduler_seconds_ = AddHistogram(r, "tessera_scheduler_seconds",
                                    "Schedule() wall time per step sent", StepLatencyBuckets(),
                                    base);
  worker_restores_ = AddCounter(r, "tessera_worker_restores_total",
                                "Worker connections after the first (lost and come back)", base);
}

void RouterMetrics::ObserveAdmitted(double queue_seconds, int64_t num_prompt_tokens) {
  request_queue_time_->Observe(queue_seconds);
  prompt_tokens_->Increment(static_cast<double>(num_prompt_tokens));
}

void RouterMetrics::ObserveToken(bool first, double seconds) {
  generation_tokens_->Increment();
  (first ? time_to_first_token_ : inter_token_latency_)->Observe(seconds);
}

void RouterMetrics::ObserveFinished(RequestOutcome outcome, double e2e_seconds) {
  requests_total_[static_cast<size_t>(outcome)]->Increment();
  e2e_request_latency_->Observe(e2e_seconds);
}

void RouterMetrics::ObserveRejected() {
  requests_total_[static_cast<size_t>(RequestOutcome::kRejected)]->Increment();
}

void RouterMetrics::ObserveStep(const ScheduledStep& step, double schedule_seconds) {
  if (!step.preempted.empty()) preemptions_->Increment(static_cast<double>(step.preempted.size()));
  if (!step.ShouldSend()) return;  // idle Schedule() calls would drown the histogram
  scheduler_seconds_->Observe(schedule_seconds);
  if (!step.empty()) step_tokens_->Observe(step.num_batched_tokens);  // not a drop-only plan
}

// The scheduler counts since its creation; a new scheduler (worker reconnected) starts at 0, so a
// value below the last one seen is a fresh start and counts whole.
void RouterMetrics::AddSince(int64_t total, int64_t* last_seen, prometheus::Counter* counter) {
  const int64_t delta = total >= *last_seen ? total - *last_seen : total;
  if (delta > 0) counter->Increment(static_cast<double>(delta));
  *last_seen = total;
}

void RouterMetrics::ObserveScheduler(const SchedulerStats* stats) {
  requests_running_->Set(stats == nullptr ? 0 : stats->num_running);
  requests_waiting_->Set(stats == nullptr ? 0 : stats->num_waiting);
  kv_blocks_used_->Set(stats == nullptr ? 0 : stats->num_blocks_used);
  kv_blocks_capacity_->Set(stats == nullptr ? 0 : stats->num_blocks_total);
  if (gateway_ != nullptr) {
    gateway_->Observe(gateway_engine_,
                      stats == nullptr ? EngineLoad{}
                                       : EngineLoad{.waiting = stats->num_waiting,
                                                    .running = stats->num_running,
                                                    .kv_blocks_used = stats->num_blocks_used,
                                                    .kv_blocks_capacity = stats->num_blocks_total});
  }
  AddSince(stats == nullptr ? 0 : stats->prefix_cache_query_tokens, &last_prefix_queries_,
           prefix_cache_queries_);
  AddSince(stats == nullptr ? 0 : stats->prefix_cache_hit_tokens, &last_prefix_hits_,
           prefix_cache_hits_);
  AddSince(stats == nullptr ? 0 : stats->prefix_cache_cold_no_snapshot, &last_cold_no_snapshot_,
           prefix_cold_no_snapshot_);
  AddSince(stats == nullptr ? 0 : stats->state_snapshots_unavailable, &last_cold_pool_full_,
           prefix_cold_pool_full_);
  AddSince(stats == nullptr ? 0 : stats->state_snapshots_saved, &last_snapshots_saved_,
           snapshots_saved_);
  AddSince(stats == nullptr ? 0 : stats->state_snapshots_evicted, &last_snapshots_evicted_,
           snapshots_evicted_);
}

}  // namespace tessera::router
