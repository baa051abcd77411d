// One Prometheus series (unlabeled, or with constant `labels`), registered in one call: the
// router's and the worker's metric tables are lists of these. The returned handle lives as long
// as the registry; keep it and observe through it (no label lookup on the hot path).
// Threading: call while building the metrics (one thread); the handles are thread-safe.
#pragma once

#include <string>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tessera::metrics {

// A family registered again (same name, help and type) is the same family (the registry's
// Merge behaviour), so several owners may add their own label values to it.
inline prometheus::Counter* AddCounter(prometheus::Registry& registry, const std::string& name,
                                       const std::string& help,
                                       const prometheus::Labels& labels = {}) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add(labels);
}

inline prometheus::Gauge* AddGauge(prometheus::Registry& registry, const std::string& name,
                                   const std::string& help,
                                   const prometheus::Labels& labels = {}) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

inline prometheus::Histogram* AddHistogram(
    prometheus::Registry& registry, const std::string& name, const std::string& help,
    const prometheus::Histogram::BucketBoundaries& buckets,
    const prometheus::Labels& labels = {}) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add(labels,
                                                                                     buckets);
}

}  // namespace tessera::metrics
