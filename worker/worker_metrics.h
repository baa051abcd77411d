// WorkerMetrics: the worker's Prometheus metrics (DESIGN.md §5, §7, prefix `tessera_`) as cached
// prometheus-cpp handles; every labeled child is created up front, so a step observes without
// label lookups, and every series is in the exposition from the start (at 0 where a backend
// never moves it: the cpu backend captures no graphs and reports no GPU busy time).
//
//   step_seconds{kind=prefill|decode|mixed} histogram plan received -> result ready  StepLatency
//   hostproc_seconds                         histogram plan received -> last launch  StepLatency
//   set_inputs_seconds                       histogram blocks + batch building       StepLatency
//   graph_replays_total                      counter   steps that replayed a graph (whole or
//                                                      piecewise)
//   graph_captures_total                     counter   graph buckets captured (start-up too)
//   graph_misses_total{reason}               counter   steps run eagerly, by GraphMissReason
//   step_tokens_total                        counter   tokens in forward steps
//   graph_padded_tokens_total                counter   tokens run as padding to a graph bucket
//   graphs_held                              gauge     graphs the runner holds
//   graph_memory_bytes                       gauge     device memory the captures took
//   gpu_busy_ratio                           gauge     device time / wall time, sliding 1 s
//                                                      window (0 when idle; BusyWindow)
// (the graph counters and the device time come from the runner's StepRunInfo in StepStats).
//   batch_size                               histogram sequences per forward step   CountBuckets
//   kv_pool_bytes                            gauge     the physical KV pool's size
//
// Ownership/threading: owned by the process (main), lent to the WorkerService; Observe* run on
// the step thread (the only one that drives the runner). The registry is read by the metrics
// server's threads; prometheus-cpp handles are thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <string_view>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "tessera/worker/v1/worker.pb.h"
#include "worker/busy_window.h"
#include "worker/graph_miss_reason.h"
#include "worker/step_executor.h"

namespace tessera::worker {

struct WorkerMetricsOptions {
  int max_num_seqs = 256;     // the top batch_size bucket; >= 1
  int64_t kv_pool_bytes = 0;
  // Device backends only: on the cpu backend device time is the compute itself, so the
  // "GPU busy" ratio would be meaningless; the gauge stays 0.
  bool measure_gpu_busy = false;
};

class WorkerMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  // Registers every family in `registry` (kept alive by this object).
  WorkerMetrics(std::shared_ptr<prometheus::Registry> registry,
                const WorkerMetricsOptions& options);

  ~WorkerMetrics();  // stops the ticker
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // One executed plan (a drop-only plan, kind kEmpty, observes nothing): step, hostproc and
  // set-inputs times, batch size, and from stats.info the graph replay / capture / miss and the
  // device time (GPU-busy ratio, when measured; a step without device time adds none).
  void ObserveStep(const StepStats& stats, const ::tessera::worker::v1::StepTimings& timings,
                   Clock::time_point now);

 private:
  void ObserveBusy(double device_seconds, Clock::time_point now);

  std::shared_ptr<prometheus::Registry> registry_;
  const bool measure_gpu_busy_;
  std::array<prometheus::Histogram*, 3> step_seconds_{};  // prefill, decode, mixed
  prometheus::Histogram* hostproc_seconds_ = nullptr;
  prometheus::Histogram* set_inputs_seconds_ = nullptr;
  prometheus::Counter* graph_replays_ = nullptr;
  prometheus::Counter* graph_captures_ = nullptr;
  prometheus::Counter* step_tokens_ = nullptr;
  prometheus::Counter* graph_padded_tokens_ = nullptr;
  prometheus::Gauge* graphs_held_ = nullptr;
  int64_t captures_seen_ = 0;  // the runner's capture total at the last step (step thread)
  prometheus::Gauge* graph_memory_bytes_ = nullptr;
  std::array<prometheus::Counter*, kNumGraphMissReasons> graph_misses_{};
  prometheus::Gauge* gpu_busy_ratio_ = nullptr;
  prometheus::Histogram* batch_size_ = nullptr;
  prometheus::Gauge* kv_pool_bytes_ = nullptr;

  // GPU-busy sliding window: fed by the step thread, read by it and by the ticker thread (which
  // lets an idle device's gauge decay to 0 with no steps to trigger an update).
  void TickBusy();
  std::mutex busy_mu_;
  BusyWindow busy_window_;
  std::mutex ticker_mu_;
  std::condition_variable ticker_cv_;
  bool stopping_ = false;  // guarded by ticker_mu_
  std::thread ticker_;     // only when measure_gpu_busy
};

}  // namespace tessera::worker
