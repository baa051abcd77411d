// GatewayMetrics: the pod-level load gauges an inference gateway's endpoint picker (EPP) scrapes,
// with the semantics of the Gateway API Inference Extension's model-server protocol (its
// proposal 003; docs/design/inference-gateway.md):
//
//   tessera_num_requests_waiting  gauge  TotalQueuedRequests: requests queued for admission
//                                        (new or preempted), summed over the router's workers
//   tessera_num_requests_running  gauge  TotalRunningRequests: requests holding a worker slot,
//                                        summed over the workers
//   tessera_kv_cache_usage_perc   gauge  KVCacheUtilization as a fraction in [0, 1] (as vLLM's
//                                        vllm:kv_cache_usage_perc): logical KV blocks in use over
//                                        usable blocks, both summed over the connected workers;
//                                        0 while none is connected
//
// These series never carry a `worker` label, with one worker or several: the EPP reads one series
// per metric name and pod (the first that matches), so per-worker series under these names would
// make it see one worker only. The per-worker views stay under tessera_requests_waiting,
// tessera_requests_running and tessera_kv_blocks_{used,capacity} (router_metrics.h).
//
// Threading: every engine thread reports its own scheduler's numbers through Observe (a mutex
// guards the table and the sums); the registry is read by the metrics servers' threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace tessera::router {

// One engine's load, as its scheduler last reported it (all 0 while its worker is away).
struct EngineLoad {
  int64_t waiting = 0;
  int64_t running = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_capacity = 0;
};

class GatewayMetrics {
 public:
  // Registers the three gauges (at 0) in `registry`, for `num_engines` engines (>= 1).
  GatewayMetrics(std::shared_ptr<prometheus::Registry> registry, size_t num_engines);

  GatewayMetrics(const GatewayMetrics&) = delete;
  GatewayMetrics& operator=(const GatewayMetrics&) = delete;

  // Engine `engine` (< num_engines) now has `load`; the pod gauges are recomputed.
  void Observe(size_t engine, const EngineLoad& load);

  size_t num_engines() const { return loads_.size(); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* kv_usage_ = nullptr;

  std::mutex mu_;
  std::vector<EngineLoad> loads_;  // guarded by mu_
};

}  // namespace tessera::router
