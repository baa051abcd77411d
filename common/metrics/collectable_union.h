// Several collectables served as one /metrics: the router's registry and the workers' series it
// federates (router/worker_metrics_federation.h). The parts must not share family names.
//
// Threading: Collect from any thread, as the parts allow (prometheus-cpp's are thread-safe).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "prometheus/collectable.h"

namespace tessera::metrics {

class CollectableUnion : public prometheus::Collectable {
 public:
  explicit CollectableUnion(std::vector<std::shared_ptr<prometheus::Collectable>> parts)
      : parts_(std::move(parts)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> all;
    for (const auto& part : parts_) {
      std::vector<prometheus::MetricFamily> families = part->Collect();
      all.insert(all.end(), std::make_move_iterator(families.begin()),
                 std::make_move_iterator(families.end()));
    }
    return all;
  }

 private:
  const std::vector<std::shared_ptr<prometheus::Collectable>> parts_;
};

}  // namespace tessera::metrics
