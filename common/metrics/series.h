// One unlabeled Prometheus series, registered in one call: the router's and the worker's metric
// tables are lists of these. The returned handle lives as long as the registry; keep it and
// observe through it (no label lookup on the hot path).
// Threading: call while building the metrics (one thread); the handles are thread-safe.
#pragma once

#include <string>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tessera::metrics {

inline prometheus::Counter* AddCounter(prometheus::Registry& registry, const std::string& name,
                                       const std::string& help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

inline prometheus::Gauge* AddGauge(prometheus::Registry& registry, const std::string& name,
                                   const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

inline prometheus::Histogram* AddHistogram(
    prometheus::Registry& registry, const std::string& name, const std::string& help,
    const prometheus::Histogram::BucketBoundaries& buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

}  // namespace tessera::metrics
