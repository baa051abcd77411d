#include "worker/worker_metrics.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/metrics/buckets.h"
#include "common/metrics/series.h"
#include "common/util/check.h"

namespace tessera::worker {
namespace {

using metrics::AddCounter;
using metrics::AddGauge;
using metrics::AddHistogram;
using metrics::CountBuckets;
using metrics::StepLatencyBuckets;

// The GPU-busy window: long enough to average many steps, short enough to follow load changes
// between scrapes. The ticker refreshes the gauge this often while no step does.
constexpr std::chrono::seconds kBusyWindow{1};
constexpr std::chrono::milliseconds kBusyTick{250};

}  // namespace

WorkerMetrics::WorkerMetrics(std::shared_ptr<prometheus::Registry> registry,
                             const WorkerMetricsOptions& options)
    : registry_(std::move(registry)),
      measure_gpu_busy_(options.measure_gpu_busy),
      busy_window_(kBusyWindow) {
  TESSERA_CHECK(registry_ != nullptr, "WorkerMetrics needs a registry");
  TESSERA_CHECK(options.max_num_seqs >= 1, "WorkerMetrics: max_num_seqs < 1");
  prometheus::Registry& r = *registry_;
  auto& steps = prometheus::BuildHistogram()
                    .Name("tessera_step_seconds")
                    .Help("Plan received to result ready, by batch kind")
                    .Register(r);
  const char* kinds[] = {"prefill", "decode", "mixed"};
  for (size_t i = 0; i < step_seconds_.size(); ++i) {
    step_seconds_[i] = &steps.Add({{"kind", kinds[i]}}, StepLatencyBuckets());
  }
  hostproc_seconds_ = AddHistogram(r, "tessera_hostproc_seconds",
                                   "Host work per step: plan received to last launch",
                                   StepLatencyBuckets());
  set_inputs_seconds_ = AddHistogram(r, "tessera_set_inputs_seconds",
                                     "Block tables and batch inputs built per step",
                                     StepLatencyBuckets());
  graph_replays_ = AddCounter(r, "tessera_graph_replays_total", "Steps that replayed a graph");
  graph_captures_ = AddCounter(r, "tessera_graph_captures_total",
                               "Graph buckets captured, at start-up or on first use (a piecewise bucket counts once)");
  step_tokens_ = AddCounter(r, "tessera_step_tokens_total", "Tokens in forward steps");
  graphs_held_ = AddGauge(r, "tessera_graphs_held",
                          "CUDA graphs the runner holds (piecewise stretches counted one by one)");
  graph_memory_bytes_ = AddGauge(r, "tessera_graph_memory_bytes",
                                 "Device memory the graph captures took (0 on cpu and emulated)");
  graph_padded_tokens_ = AddCounter(r, "tessera_graph_padded_tokens_total",
                                    "Tokens run beyond the steps' own, padding to a graph bucket");
  auto& misses = prometheus::BuildCounter()
                     .Name("tessera_graph_misses_total")
                     .Help("Steps that ran without a graph, by reason")
                     .Register(r);
  for (size_t i = 0; i < kNumGraphMissReasons; ++i) {
    graph_misses_[i] = &misses.Add(
        {{"reason", std::string(GraphMissReasonLabel(static_cast<GraphMissReason>(i)))}});
  }
  gpu_busy_ratio_ = AddGauge(r, "tessera_gpu_busy_ratio",
                             "Device time over wall time in a sliding 1 s window (0 on cpu)");
  batch_size_ = AddHistogram(r, "tessera_batch_size", "Sequences per forward step",
                             CountBuckets(options.max_num_seqs));
  kv_pool_bytes_ = AddGauge(r, "tessera_kv_pool_bytes", "Physical KV pool size");
  kv_pool_bytes_->Set(static_cast<double>(options.kv_pool_bytes));
  if (measure_gpu_busy_) ticker_ = std::thread([this] { TickBusy(); });
}

void WorkerMetrics::ObserveStep(const StepStats& stats, const v1::StepTimings& timings,
                                Clock::time_point now) {
  if (stats.kind == StepKind::kEmpty) return;
  const size_t kind = stats.kind == StepKind::kPrefill  ? 0
                      : stats.kind == StepKind::kDecode ? 1
                                                        : 2;
  step_seconds_[kind]->Observe(timings.total_seconds());
  hostproc_seconds_->Observe(timings.host_seconds());
  set_inputs_seconds_->Observe(stats.set_inputs_seconds);
  batch_size_->Observe(stats.num_sequences);
  step_tokens_->Increment(stats.num_tokens);
  const StepRunInfo& info = stats.info;
  graph_padded_tokens_->Increment(info.padded_tokens);
  graphs_held_->Set(static_cast<double>(info.graphs_held));
  graph_memory_bytes_->Set(static_cast<double>(info.graph_memory_bytes));
  if (info.graph_replayed) graph_replays_->Increment();
  // The runner's running total (start-up captures included): the counter follows it.
  if (info.graph_captures > captures_seen_) {
    graph_captures_->Increment(static_cast<double>(info.graph_captures - captures_seen_));
    captures_seen_ = info.graph_captures;
  }
  if (info.graph_miss.has_value()) {
    graph_misses_[static_cast<size_t>(*info.graph_miss)]->Increment();
  }
  if (measure_gpu_busy_) ObserveBusy(std::max(0.0, info.device_seconds), now);
}

void WorkerMetrics::ObserveBusy(double device_seconds, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(busy_mu_);
  busy_window_.Add(now, device_seconds);
  gpu_busy_ratio_->Set(busy_window_.Ratio(now));
}

void WorkerMetrics::TickBusy() {
  std::unique_lock<std::mutex> lock(ticker_mu_);
  while (!ticker_cv_.wait_for(lock, kBusyTick, [this] { return stopping_; })) {
    std::lock_guard<std::mutex> busy(busy_mu_);
    gpu_busy_ratio_->Set(busy_window_.Ratio(Clock::now()));
  }
}

WorkerMetrics::~WorkerMetrics() {
  {
    std::lock_guard<std::mutex> lock(ticker_mu_);
    stopping_ = true;
  }
  ticker_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

}  // namespace tessera::worker
