// The workers' Prometheus series on the router's own /metrics, each labelled worker="I": one
// scrape target for a whole `tessera serve` (graph reuse, host work, GPU busy and step times next
// to the router's queue and latency series). `tessera serve` gives the router each worker's
// loopback metrics address (--worker-metrics, in --worker order).
//
// A background thread reads every worker's /metrics each `period` (bounded by `timeout` and
// `max_bytes`) and keeps the parsed families; Collect hands out the last good ones, so a
// Prometheus scrape never waits on a worker. A worker whose read fails (restarting, hung) has no
// series until it answers again, and `tessera_worker_metrics_up{worker="I"}` says 0 meanwhile.
//
// Threading: Start and the destructor on the owner thread; Collect on any thread (the metrics
// servers' I/O threads); the reads on the federation's own thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "prometheus/collectable.h"

namespace tessera::router {

struct WorkerMetricsFederationOptions {
  std::vector<std::string> addresses;  // worker I's metrics HOST:PORT at index I
  absl::Duration period = absl::Seconds(2);
  absl::Duration timeout = absl::Seconds(1);
  size_t max_bytes = 8 << 20;
};

class WorkerMetricsFederation : public prometheus::Collectable {
 public:
  // Starts the reading thread (its first round begins at once).
  static std::shared_ptr<WorkerMetricsFederation> Start(WorkerMetricsFederationOptions options);
  ~WorkerMetricsFederation() override;  // stops and joins the thread

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  explicit WorkerMetricsFederation(WorkerMetricsFederationOptions options)
      : options_(std::move(options)) {}
  void Run();
  std::vector<prometheus::MetricFamily> ReadAll() const;

  const WorkerMetricsFederationOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;                          // guarded by mu_
  std::vector<prometheus::MetricFamily> families_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tessera::router
