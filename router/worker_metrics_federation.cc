#include "router/worker_metrics_federation.h"

#include <map>
#include <utility>

#include "absl/status/statusor.h"
#include "common/http/http_get.h"
#include "common/metrics/exposition_parser.h"

namespace tessera::router {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;

// Puts worker="index" on every series (replacing a worker label the worker set itself).
void LabelWithWorker(std::vector<MetricFamily>& families, const std::string& index) {
  for (MetricFamily& family : families) {
    for (ClientMetric& series : family.metric) {
      std::erase_if(series.label, [](const ClientMetric::Label& l) { return l.name == "worker"; });
      series.label.push_back({.name = "worker", .value = index});
    }
  }
}

// Appends `from`'s series to the family of the same name in `into` (kept in first-seen order);
// a family whose type disagrees with the one already there is dropped.
void Merge(std::vector<MetricFamily> from, std::vector<MetricFamily>& into,
           std::map<std::string, size_t>& index) {
  for (MetricFamily& family : from) {
    auto [it, added] = index.try_emplace(family.name, into.size());
    if (added) {
      into.push_back(std::move(family));
      continue;
    }
    MetricFamily& existing = into[it->second];
    if (existing.type != family.type) continue;
    existing.metric.insert(existing.metric.end(), std::make_move_iterator(family.metric.begin()),
                           std::make_move_iterator(family.metric.end()));
  }
}

}  // namespace

std::shared_ptr<WorkerMetricsFederation> WorkerMetricsFederation::Start(
    WorkerMetricsFederationOptions options) {
  std::shared_ptr<WorkerMetricsFederation> federation(
      new WorkerMetricsFederation(std::move(options)));
  federation->thread_ = std::thread([raw = federation.get()] { raw->Run(); });
  return federation;
}

WorkerMetricsFederation::~WorkerMetricsFederation() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<MetricFamily> WorkerMetricsFederation::Collect() const {
  std::lock_guard<std::mutex> lock(mu_);
  return families_;
}

std::vector<MetricFamily> WorkerMetricsFederation::ReadAll() const {
  MetricFamily up{.name = "tessera_worker_metrics_up",
                  .help = "1 when the router's last read of this worker's /metrics succeeded",
                  .type = prometheus::MetricType::Gauge,
                  .metric = {}};
  std::vector<MetricFamily> all;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < options_.addresses.size(); ++i) {
    const std::string worker = std::to_string(i);
    absl::StatusOr<std::string> text =
        http::HttpGet(options_.addresses[i], "/metrics", options_.timeout, options_.max_bytes);
    absl::StatusOr<std::vector<MetricFamily>> families =
        text.ok() ? metrics::ParseExposition(*text) : text.status();
    ClientMetric series{.label = {{.name = "worker", .value = worker}}};
    series.gauge.value = families.ok() ? 1 : 0;
    up.metric.push_back(std::move(series));
    if (!families.ok()) continue;
    LabelWithWorker(*families, worker);
    Merge(*std::move(families), all, index);
  }
  all.push_back(std::move(up));
  return all;
}

void WorkerMetricsFederation::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    std::vector<MetricFamily> families = ReadAll();
    lock.lock();
    families_ = std::move(families);
    wake_.wait_for(lock, absl::ToChronoMilliseconds(options_.period), [this] { return stopping_; });
  }
}

}  // namespace tessera::router
