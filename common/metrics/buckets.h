// Histogram bucket boundaries shaped for LLM serving (DESIGN.md §7): request latencies that span
// milliseconds (a cached short prompt) to minutes (a long generation behind a queue), step-level
// latencies from microseconds (scheduling, host work) to seconds, and token/sequence counts.
//
// Every function returns strictly increasing upper bounds, ready for
// prometheus::BuildHistogram().Add({}, buckets); the +Inf bucket is implicit.
// Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::metrics {

// start, start * factor, ..., `count` values. Preconditions: start > 0, factor > 1, count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// Per-request latencies in seconds (time to first token, end-to-end, queue time): 1 ms to 10 min,
// 1-2.5-5 per decade up to 10 s, then 20 s, 30 s, 1, 2, 5 and 10 min.
std::vector<double> RequestLatencyBuckets();

// Per-step / per-token latencies in seconds (inter-token latency, step time, host work,
// scheduling): 10 us to 60 s, 1-2.5-5 per decade up to 10 s, then 30 s and 60 s. Fine at the low
// end because scheduler and host-prep times are microseconds and a regression there matters.
std::vector<double> StepLatencyBuckets();

// Counts (tokens per step, sequences per step): 1, 2, 4, ... every power of two below
// `max_count`, then `max_count` itself, so the top bucket is the configured limit.
// Precondition: max_count >= 1.
std::vector<double> CountBuckets(int64_t max_count);

}  // namespace tessera::metrics
