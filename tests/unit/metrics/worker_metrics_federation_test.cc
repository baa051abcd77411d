// WorkerMetricsFederation against two real MetricsServers (the workers' /metrics) on loopback:
// their series come back labelled worker="0"/"1" and merged by family, with
// tessera_worker_metrics_up 1; when worker 1's server stops, its series go and its up reads 0,
// while worker 0's stay. Served through a CollectableUnion with the router's own registry.
#include "router/worker_metrics_federation.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/http/http_get.h"
#include "common/metrics/collectable_union.h"
#include "common/metrics/metrics_server.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tessera::router {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::shared_ptr<prometheus::Registry> WorkerRegistry(double steps) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("tessera_graph_replays_total").Help("replays")
      .Register(*registry).Add({}).Increment(steps);
  prometheus::BuildHistogram().Name("tessera_step_seconds").Help("step").Register(*registry)
      .Add({{"phase", "decode"}}, prometheus::Histogram::BucketBoundaries{0.01, 0.1})
      .Observe(0.05);
  return registry;
}

std::unique_ptr<metrics::MetricsServer> Serve(std::shared_ptr<prometheus::Collectable> c) {
  absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> server =
      metrics::MetricsServer::Start(std::move(c), {});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

// Polls Collect (rendered) until it holds `wanted`, for at most 10 s.
std::string AwaitText(const prometheus::Collectable& c, const std::string& wanted) {
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text = metrics::RenderMetrics(c);
    if (text.find(wanted) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return text;
}

TEST(WorkerMetricsFederationTest, WorkersSeriesAreLabelledAndFollowTheirHealth) {
  std::unique_ptr<metrics::MetricsServer> worker0 = Serve(WorkerRegistry(3));
  std::unique_ptr<metrics::MetricsServer> worker1 = Serve(WorkerRegistry(5));
  ASSERT_TRUE(worker0 && worker1);
  auto router = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("tessera_requests_total").Help("r").Register(*router).Add({});
  std::shared_ptr<WorkerMetricsFederation> federation = WorkerMetricsFederation::Start(
      {.addresses = {absl::StrCat("127.0.0.1:", worker0->port()),
                     absl::StrCat("127.0.0.1:", worker1->port())},
       .period = absl::Milliseconds(50)});
  metrics::CollectableUnion served({router, federation});

  std::string text = AwaitText(served, "tessera_worker_metrics_up{worker=\"1\"} 1");
  EXPECT_THAT(text, HasSubstr("tessera_requests_total 0"));
  EXPECT_THAT(text, HasSubstr("tessera_graph_replays_total{worker=\"0\"} 3"));
  EXPECT_THAT(text, HasSubstr("tessera_graph_replays_total{worker=\"1\"} 5"));
  EXPECT_THAT(text, HasSubstr(
      "tessera_step_seconds_bucket{phase=\"decode\",worker=\"1\",le=\"0.1\"} 1"));
  EXPECT_THAT(text, HasSubstr("tessera_worker_metrics_up{worker=\"0\"} 1"));
  // One HELP/TYPE per family: both workers' series sit in one family.
  size_t types = 0;
  for (size_t at = 0; (at = text.find("# TYPE tessera_graph_replays_total", at)) != std::string::npos;
       ++at) {
    ++types;
  }
  EXPECT_EQ(types, 1u);

  worker1->Stop();
  text = AwaitText(served, "tessera_worker_metrics_up{worker=\"1\"} 0");
  EXPECT_THAT(text, HasSubstr("tessera_worker_metrics_up{worker=\"1\"} 0"));
  EXPECT_THAT(text, Not(HasSubstr("tessera_graph_replays_total{worker=\"1\"}")));
  EXPECT_THAT(text, HasSubstr("tessera_graph_replays_total{worker=\"0\"} 3"));
}

TEST(HttpGetTest, StatusesAndLimits) {
  std::unique_ptr<metrics::MetricsServer> server = Serve(WorkerRegistry(1));
  ASSERT_NE(server, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", server->port());
  absl::StatusOr<std::string> body = http::HttpGet(address, "/metrics", absl::Seconds(5), 1 << 20);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_THAT(*body, HasSubstr("tessera_graph_replays_total 1"));
  EXPECT_EQ(http::HttpGet(address, "/nowhere", absl::Seconds(5), 1 << 20).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(http::HttpGet(address, "/metrics", absl::Seconds(5), 16).status().code(),
            absl::StatusCode::kInternal);
  server->Stop();
  EXPECT_EQ(http::HttpGet(address, "/metrics", absl::Seconds(5), 1 << 20).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::router
