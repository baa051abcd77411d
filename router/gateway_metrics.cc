#include "router/gateway_metrics.h"

#include <utility>

#include "common/metrics/series.h"
#include "common/util/check.h"

namespace tessera::router {

GatewayMetrics::GatewayMetrics(std::shared_ptr<prometheus::Registry> registry,
                               size_t num_engines)
    : registry_(std::move(registry)), loads_(num_engines) {
  TESSERA_CHECK(registry_ != nullptr, "GatewayMetrics needs a registry");
  TESSERA_CHECK(num_engines >= 1, "GatewayMetrics needs at least one engine");
  prometheus::Registry& r = *registry_;
  waiting_ = metrics::AddGauge(
      r, "tessera_num_requests_waiting",
      "Requests queued for admission (new or preempted), all workers of this router "
      "(model-server protocol TotalQueuedRequests)");
  running_ = metrics::AddGauge(
      r, "tessera_num_requests_running",
      "Requests holding a worker slot, all workers of this router "
      "(model-server protocol TotalRunningRequests)");
  kv_usage_ = metrics::AddGauge(
      r, "tessera_kv_cache_usage_perc",
      "Fraction (0-1) of the connected workers' usable KV blocks in use "
      "(model-server protocol KVCacheUtilization)");
}

void GatewayMetrics::Observe(size_t engine, const EngineLoad& load) {
  TESSERA_CHECK(engine < loads_.size(), "GatewayMetrics::Observe: no such engine");
  std::lock_guard<std::mutex> lock(mu_);
  loads_[engine] = load;
  EngineLoad sum;
  for (const EngineLoad& each : loads_) {
    sum.waiting += each.waiting;
    sum.running += each.running;
    sum.kv_blocks_used += each.kv_blocks_used;
    sum.kv_blocks_capacity += each.kv_blocks_capacity;
  }
  // Set under the lock, so two engines' updates cannot interleave into a mixed state.
  waiting_->Set(static_cast<double>(sum.waiting));
  running_->Set(static_cast<double>(sum.running));
  kv_usage_->Set(sum.kv_blocks_capacity > 0 ? static_cast<double>(sum.kv_blocks_used) /
                                                  static_cast<double>(sum.kv_blocks_capacity)
                                            : 0.0);
}

}  // namespace tessera::router
