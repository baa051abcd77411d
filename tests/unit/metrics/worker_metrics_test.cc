// WorkerMetrics: every DESIGN.md §7 worker series is present from the start (graph counters and
// the busy ratio stay 0 on the cpu backend), and a step moves the series it documents.
#include "worker/worker_metrics.h"

#include <map>
#include <thread>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "common/metrics/metrics_server.h"
#include "tests/unit/metrics/exposition.h"

namespace tessera::worker {
namespace {

std::map<std::string, double> Scrape(const prometheus::Registry& registry) {
  absl::StatusOr<std::map<std::string, double>> samples =
      metrics::testing::ParseExposition(metrics::RenderMetrics(registry));
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::map<std::string, double>{};
}

v1::StepTimings Timings(double host, double device, double total) {
  v1::StepTimings timings;
  timings.set_host_seconds(host);
  timings.set_device_seconds(device);
  timings.set_total_seconds(total);
  return timings;
}

TEST(WorkerMetricsTest, EverySeriesExistsFromTheStart) {
  auto registry = std::make_shared<prometheus::Registry>();
  WorkerMetrics metrics(registry, {.max_num_seqs = 64, .kv_pool_bytes = 1 << 20});
  const std::map<std::string, double> s = Scrape(*registry);
  for (const char* name :
       {"tessera_step_seconds_count{kind=\"prefill\"}",
        "tessera_step_seconds_count{kind=\"decode\"}",
        "tessera_step_seconds_count{kind=\"mixed\"}", "tessera_hostproc_seconds_count",
        "tessera_set_inputs_seconds_count", "tessera_graph_replays_total",
        "tessera_graph_captures_total", "tessera_graph_misses_total{reason=\"eager\"}",
        "tessera_graph_misses_total{reason=\"oversize\"}",
        "tessera_graph_misses_total{reason=\"disabled\"}", "tessera_gpu_busy_ratio",
        "tessera_batch_size_count"}) {
    ASSERT_TRUE(s.count(name)) << name;
    EXPECT_EQ(s.at(name), 0) << name;
  }
  EXPECT_EQ(s.at("tessera_kv_pool_bytes"), 1 << 20);
  EXPECT_TRUE(s.count("tessera_batch_size_bucket{le=\"64\"}")) << "top bucket = max_num_seqs";
}

TEST(WorkerMetricsTest, StepsByKind) {
  auto registry = std::make_shared<prometheus::Registry>();
  WorkerMetrics metrics(registry, {.max_num_seqs = 64});
  const auto now = WorkerMetrics::Clock::now();
  metrics.ObserveStep({.kind = StepKind::kDecode, .num_sequences = 5, .num_tokens = 5,
                       .set_inputs_seconds = 0.00002,
                       .info = {.graph_miss = GraphMissReason::kOversize}},
                      Timings(0.0001, 0.01, 0.011), now);
  metrics.ObserveStep({.kind = StepKind::kMixed, .num_sequences = 2, .num_tokens = 40},
                      Timings(0.0001, 0.05, 0.06), now);
  metrics.ObserveStep({.kind = StepKind::kEmpty}, Timings(0.00001, 0, 0.00001), now);
  const std::map<std::string, double> s = Scrape(*registry);
  EXPECT_EQ(s.at("tessera_step_seconds_count{kind=\"decode\"}"), 1);
  EXPECT_EQ(s.at("tessera_step_seconds_count{kind=\"mixed\"}"), 1);
  EXPECT_EQ(s.at("tessera_step_seconds_count{kind=\"prefill\"}"), 0);
  EXPECT_EQ(s.at("tessera_batch_size_count"), 2) << "a drop-only plan is no batch";
  EXPECT_EQ(s.at("tessera_batch_size_sum"), 7);
  EXPECT_EQ(s.at("tessera_hostproc_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(s.at("tessera_set_inputs_seconds_sum"), 0.00002);
  EXPECT_EQ(s.at("tessera_graph_misses_total{reason=\"oversize\"}"), 1);
  EXPECT_EQ(s.at("tessera_graph_misses_total{reason=\"eager\"}"), 0);
  EXPECT_EQ(s.at("tessera_graph_replays_total"), 0);
  EXPECT_EQ(s.at("tessera_gpu_busy_ratio"), 0) << "not measured on cpu";
}

TEST(WorkerMetricsTest, GraphCountersFollowTheRunInfo) {
  auto registry = std::make_shared<prometheus::Registry>();
  WorkerMetrics metrics(registry, {.max_num_seqs = 8});
  const auto now = WorkerMetrics::Clock::now();
  // The runner had captured 5 buckets at start-up; this step captures a sixth.
  const StepStats captured{.kind = StepKind::kDecode, .num_sequences = 1, .num_tokens = 1,
                           .info = {.graph_replayed = true,
                                    .graph_captured = true,
                                    .graph_miss = std::nullopt,
                                    .graph_captures = 6}};
  const StepStats replayed{.kind = StepKind::kDecode, .num_sequences = 1, .num_tokens = 1,
                           .info = {.graph_replayed = true, .graph_miss = std::nullopt,
                                    .graph_captures = 6}};
  const StepStats eager{.kind = StepKind::kDecode, .num_sequences = 1, .num_tokens = 1,
                        .info = {.graph_miss = GraphMissReason::kEager}};
  const StepStats mixed{.kind = StepKind::kMixed, .num_sequences = 3, .num_tokens = 261,
                        .info = {.graph_replayed = true, .padded_tokens = 3,
                                 .graph_captures = 7, .graphs_held = 40,
                                 .graph_memory_bytes = 1 << 20}};
  for (const StepStats* stats : {&captured, &replayed, &replayed, &eager, &mixed}) {
    metrics.ObserveStep(*stats, Timings(0.0001, 0.001, 0.002), now);
  }
  // A drop-only plan observes nothing, whatever its info says.
  const StepStats empty{.kind = StepKind::kEmpty, .info = replayed.info};
  metrics.ObserveStep(empty, Timings(0, 0, 0), now);
  const std::map<std::string, double> s = Scrape(*registry);
  EXPECT_EQ(s.at("tessera_graph_replays_total"), 4);
  EXPECT_EQ(s.at("tessera_graph_captures_total"), 7);
  EXPECT_EQ(s.at("tessera_step_tokens_total"), 265);
  EXPECT_EQ(s.at("tessera_graph_padded_tokens_total"), 3);
  EXPECT_EQ(s.at("tessera_graphs_held"), 40);
  EXPECT_EQ(s.at("tessera_graph_memory_bytes"), 1 << 20);
  EXPECT_EQ(s.at("tessera_graph_misses_total{reason=\"eager\"}"), 1);
  EXPECT_EQ(s.at("tessera_graph_misses_total{reason=\"oversize\"}"), 0);
  EXPECT_EQ(s.at("tessera_graph_misses_total{reason=\"disabled\"}"), 0);
}

// Device time over the last second of wall time; with no steps the ticker lets it decay to 0.
TEST(WorkerMetricsTest, GpuBusyRatioIsASlidingWindowThatDecaysWhenIdle) {
  auto registry = std::make_shared<prometheus::Registry>();
  WorkerMetrics metrics(registry, {.max_num_seqs = 8, .measure_gpu_busy = true});
  const StepStats decode{.kind = StepKind::kDecode, .num_sequences = 1, .num_tokens = 1,
                         .info = {.graph_miss = std::nullopt, .device_seconds = 0.3}};
  const auto now = WorkerMetrics::Clock::now();
  metrics.ObserveStep(decode, Timings(0, 0.3, 0.3), now);
  metrics.ObserveStep(decode, Timings(0, 0.3, 0.3), now);
  EXPECT_NEAR(Scrape(*registry).at("tessera_gpu_busy_ratio"), 0.6, 1e-9);
  double ratio = 1;
  for (int i = 0; i < 60 && ratio > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ratio = Scrape(*registry).at("tessera_gpu_busy_ratio");
  }
  EXPECT_EQ(ratio, 0) << "an idle device's busy ratio must decay to 0";
}

}  // namespace
}  // namespace tessera::worker
