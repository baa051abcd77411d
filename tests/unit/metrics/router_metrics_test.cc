// RouterMetrics: every DESIGN.md §7 router series is in the exposition from the start (labeled
// children included), and each Observe* moves the series it documents.
#include "router/router_metrics.h"

#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "common/metrics/metrics_server.h"
#include "tests/unit/metrics/exposition.h"

namespace tessera::router {
namespace {

class RouterMetricsTest : public ::testing::Test {
 protected:
  std::map<std::string, double> Scrape() {
    absl::StatusOr<std::map<std::string, double>> samples =
        metrics::testing::ParseExposition(metrics::RenderMetrics(*registry_));
    EXPECT_TRUE(samples.ok()) << samples.status();
    return samples.ok() ? *samples : std::map<std::string, double>{};
  }

  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  RouterMetrics metrics_{registry_, {.max_num_batched_tokens = 512}};
};

TEST_F(RouterMetricsTest, EverySeriesExistsAtZero) {
  const std::map<std::string, double> s = Scrape();
  for (const char* status : {"stop", "eos", "length", "cancelled", "error", "rejected"}) {
    const std::string key = std::string("tessera_requests_total{status=\"") + status + "\"}";
    ASSERT_TRUE(s.count(key)) << key;
    EXPECT_EQ(s.at(key), 0);
  }
  for (const char* name :
       {"tessera_requests_running", "tessera_requests_waiting",
        "tessera_time_to_first_token_seconds_count", "tessera_inter_token_latency_seconds_count",
        "tessera_e2e_request_latency_seconds_count", "tessera_request_queue_time_seconds_count",
        "tessera_prompt_tokens_total", "tessera_generation_tokens_total",
        "tessera_prefix_cache_queries_total", "tessera_prefix_cache_hits_total",
        "tessera_prefix_cache_enabled", "tessera_kv_blocks_used", "tessera_kv_blocks_capacity",
        "tessera_preemptions_total", "tessera_step_tokens_count",
        "tessera_scheduler_seconds_count"}) {
    ASSERT_TRUE(s.count(name)) << name;
    EXPECT_EQ(s.at(name), 0) << name;
  }
  EXPECT_TRUE(s.count("tessera_step_tokens_bucket{le=\"512\"}")) << "top bucket = the budget";
}

TEST_F(RouterMetricsTest, RequestLifecycle) {
  metrics_.ObserveAdmitted(0.002, 40);
  metrics_.ObserveToken(/*first=*/true, 0.05);
  metrics_.ObserveToken(/*first=*/false, 0.01);
  metrics_.ObserveToken(/*first=*/false, 0.01);
  metrics_.ObserveFinished(RequestOutcome::kLength, 0.08);
  metrics_.ObserveRejected();
  const std::map<std::string, double> s = Scrape();
  EXPECT_EQ(s.at("tessera_request_queue_time_seconds_count"), 1);
  EXPECT_EQ(s.at("tessera_prompt_tokens_total"), 40);
  EXPECT_EQ(s.at("tessera_generation_tokens_total"), 3);
  EXPECT_EQ(s.at("tessera_time_to_first_token_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(s.at("tessera_time_to_first_token_seconds_sum"), 0.05);
  EXPECT_EQ(s.at("tessera_inter_token_latency_seconds_count"), 2);
  EXPECT_EQ(s.at("tessera_requests_total{status=\"length\"}"), 1);
  EXPECT_EQ(s.at("tessera_requests_total{status=\"rejected\"}"), 1);
  EXPECT_EQ(s.at("tessera_e2e_request_latency_seconds_count"), 1) << "rejections have none";
}

TEST_F(RouterMetricsTest, StepsCountTokensAndPreemptions) {
  ScheduledStep step;
  step.requests.push_back({.request_id = 1, .slot = 0, .is_new = true, .is_prefill = true,
                           .samples = true, .start_position = 32, .num_tokens = 8,
                           .num_prompt_tokens = 40, .num_known_tokens = 40});
  step.requests.push_back({.request_id = 2, .slot = 1, .start_position = 10, .num_tokens = 1});
  step.num_batched_tokens = 9;
  step.preempted.push_back(3);
  metrics_.ObserveStep(step, 0.0001);
  ScheduledStep idle;  // nothing to send: only preemptions would count
  metrics_.ObserveStep(idle, 0.0001);
  const std::map<std::string, double> s = Scrape();
  EXPECT_EQ(s.at("tessera_step_tokens_count"), 1);
  EXPECT_EQ(s.at("tessera_step_tokens_sum"), 9);
  EXPECT_EQ(s.at("tessera_scheduler_seconds_count"), 1);
  EXPECT_EQ(s.at("tessera_preemptions_total"), 1);
}

TEST_F(RouterMetricsTest, PrefixCacheCountersFollowTheSchedulerTotals) {
  SchedulerStats stats;
  stats.prefix_cache_query_tokens = 40;
  stats.prefix_cache_hit_tokens = 32;
  metrics_.ObserveScheduler(&stats);
  metrics_.ObserveScheduler(&stats);  // unchanged totals add nothing
  stats.prefix_cache_query_tokens = 50;
  metrics_.ObserveScheduler(&stats);
  std::map<std::string, double> s = Scrape();
  EXPECT_EQ(s.at("tessera_prefix_cache_queries_total"), 50);
  EXPECT_EQ(s.at("tessera_prefix_cache_hits_total"), 32);
  // The worker reconnected: a new scheduler counts from 0 again; the counters keep growing.
  SchedulerStats fresh;
  fresh.prefix_cache_query_tokens = 8;
  metrics_.ObserveScheduler(&fresh);
  metrics_.ObserveScheduler(nullptr);
  fresh.prefix_cache_query_tokens = 3;
  metrics_.ObserveScheduler(&fresh);
  s = Scrape();
  EXPECT_EQ(s.at("tessera_prefix_cache_queries_total"), 61);
  EXPECT_EQ(s.at("tessera_prefix_cache_hits_total"), 32);
}

TEST_F(RouterMetricsTest, SchedulerGaugesAndPrefixCacheFlag) {
  SchedulerStats stats;
  stats.num_running = 3;
  stats.num_waiting = 2;
  stats.num_blocks_used = 10;
  stats.num_blocks_total = 100;
  metrics_.ObserveScheduler(&stats);
  metrics_.SetPrefixCacheEnabled(true);
  std::map<std::string, double> s = Scrape();
  EXPECT_EQ(s.at("tessera_requests_running"), 3);
  EXPECT_EQ(s.at("tessera_requests_waiting"), 2);
  EXPECT_EQ(s.at("tessera_kv_blocks_used"), 10);
  EXPECT_EQ(s.at("tessera_kv_blocks_capacity"), 100);
  EXPECT_EQ(s.at("tessera_prefix_cache_enabled"), 1);
  metrics_.ObserveScheduler(nullptr);  // the worker went away
  s = Scrape();
  EXPECT_EQ(s.at("tessera_requests_running"), 0);
  EXPECT_EQ(s.at("tessera_kv_blocks_capacity"), 0);
}

TEST(WorkerSharesPrefixesTest, FollowsTheAdvertisedFeature) {
  ::tessera::worker::v1::DescribeResponse worker;
  worker.add_features("logprobs");
  EXPECT_FALSE(WorkerSharesPrefixes(worker));  // e.g. a hybrid model's worker
  worker.add_features("prefix_cache");
  EXPECT_TRUE(WorkerSharesPrefixes(worker));
}

}  // namespace
}  // namespace tessera::router
