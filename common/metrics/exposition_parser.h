// Reads Prometheus' text exposition format (0.0.4) back into prometheus-cpp MetricFamily values,
// so the router can re-serve another process's series (with a label added) through its own
// registry's serializer: what `tessera serve` uses to put the workers' series on the router's
// /metrics (router/worker_metrics_federation.h).
//
// Understood: `# HELP` and `# TYPE` lines, counters, gauges, untyped samples, histograms
// (`_bucket{le=...}`, `_sum`, `_count`, grouped by their other labels) and summaries
// (`{quantile=...}`, `_sum`, `_count`); escaped label values; `+Inf`, `-Inf`, `NaN`; an optional
// timestamp. A sample with no `# TYPE` before it is an untyped family of its own name. Anything
// else (a malformed line, a bucket without `le`) is INVALID_ARGUMENT naming the line: the caller
// drops that whole scrape rather than serve part of it.
//
// Threading: pure function.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/metric_family.h"

namespace tessera::metrics {

absl::StatusOr<std::vector<prometheus::MetricFamily>> ParseExposition(std::string_view text);

}  // namespace tessera::metrics
