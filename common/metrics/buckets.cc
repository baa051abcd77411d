#include "common/metrics/buckets.h"

#include "common/util/check.h"

namespace tessera::metrics {
namespace {

// Appends 1, 2.5 and 5 times every power of ten in [first_decade, last_decade), then
// last_decade itself. Literal multipliers times exact powers of ten keep the printed `le`
// labels short (0.0025, not 0.0025000000000000001).
void AppendDecades(double first_decade, double last_decade, std::vector<double>* out) {
  for (double decade = first_decade; decade < last_decade * 0.5; decade *= 10) {
    out->push_back(decade);
    out->push_back(decade * 2.5);
    out->push_back(decade * 5);
  }
  out->push_back(last_decade);
}

}  // namespace

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  TESSERA_CHECK(start > 0 && factor > 1 && count >= 1,
                "ExponentialBuckets needs start > 0, factor > 1, count >= 1");
  std::vector<double> buckets;
  buckets.reserve(static_cast<size_t>(count));
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) buckets.push_back(bound);
  return buckets;
}

std::vector<double> RequestLatencyBuckets() {
  std::vector<double> buckets;
  AppendDecades(0.001, 10, &buckets);
  for (double seconds : {20.0, 30.0, 60.0, 120.0, 300.0, 600.0}) buckets.push_back(seconds);
  return buckets;
}

std::vector<double> StepLatencyBuckets() {
  std::vector<double> buckets;
  AppendDecades(0.00001, 10, &buckets);
  buckets.push_back(30);
  buckets.push_back(60);
  return buckets;
}

std::vector<double> CountBuckets(int64_t max_count) {
  TESSERA_CHECK(max_count >= 1, "CountBuckets needs max_count >= 1");
  std::vector<double> buckets;
  for (int64_t bound = 1; bound < max_count; bound *= 2) {
    buckets.push_back(static_cast<double>(bound));
  }
  buckets.push_back(static_cast<double>(max_count));
  return buckets;
}

}  // namespace tessera::metrics
