// MetricsServer over a real loopback socket (port 0): /metrics is valid exposition text with the
// registry's values, /healthz is 200, /readyz follows the readiness callback (200 / 503 + reason),
// bad options and a taken port are errors, Stop closes the port, slow clients hold nothing up.
#include "common/metrics/metrics_server.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "tests/unit/http/raw_client.h"
#include "tests/unit/metrics/exposition.h"

namespace tessera::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::Get;
using testing::ParseExposition;

std::shared_ptr<prometheus::Registry> SampleRegistry() {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("test_requests_total").Help("Requests").Register(*registry)
      .Add({{"status", "ok"}}).Increment(3);
  prometheus::BuildGauge().Name("test_queue").Help("Queue \"depth\"").Register(*registry)
      .Add({}).Set(7);
  auto& histogram = prometheus::BuildHistogram()
                        .Name("test_latency_seconds")
                        .Help("Latency")
                        .Register(*registry)
                        .Add({}, prometheus::Histogram::BucketBoundaries{0.1, 1});
  histogram.Observe(0.05);
  histogram.Observe(0.5);
  return registry;
}

std::unique_ptr<MetricsServer> StartOrDie(std::shared_ptr<prometheus::Collectable> registry,
                                          MetricsServerOptions options = {}) {
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start(std::move(registry), std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(MetricsServerTest, ServesTheRegistryAsExpositionText) {
  std::unique_ptr<MetricsServer> server = StartOrDie(SampleRegistry());
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  httplib::Result response = Get("127.0.0.1", server->port(), "/metrics");
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 200);
  EXPECT_THAT(response->get_header_value("Content-Type"), StartsWith("text/plain; version=0.0.4"));
  absl::StatusOr<std::map<std::string, double>> samples = ParseExposition(response->body);
  ASSERT_TRUE(samples.ok()) << samples.status() << "\n" << response->body;
  EXPECT_EQ(samples->at("test_requests_total{status=\"ok\"}"), 3);
  EXPECT_EQ(samples->at("test_queue"), 7);
  EXPECT_EQ(samples->at("test_latency_seconds_count"), 2);
  EXPECT_EQ(samples->at("test_latency_seconds_bucket{le=\"0.1\"}"), 1);
  EXPECT_EQ(samples->at("test_latency_seconds_bucket{le=\"+Inf\"}"), 2);
  EXPECT_THAT(response->body, HasSubstr("# TYPE test_latency_seconds histogram"));
}

TEST(MetricsServerTest, RenderMetricsMatchesWhatIsServed) {
  auto registry = SampleRegistry();
  std::unique_ptr<MetricsServer> server = StartOrDie(registry);
  ASSERT_NE(server, nullptr);
  httplib::Result response = Get("127.0.0.1", server->port(), "/metrics");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->body, RenderMetrics(*registry));
}

TEST(MetricsServerTest, HealthzIsOkAndUnknownPathsAre404) {
  std::unique_ptr<MetricsServer> server = StartOrDie(SampleRegistry());
  ASSERT_NE(server, nullptr);
  httplib::Result health = Get("127.0.0.1", server->port(), "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  httplib::Result missing = Get("127.0.0.1", server->port(), "/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(MetricsServerTest, ReadyzFollowsTheReadinessCallback) {
  std::atomic<bool> ready{false};
  std::unique_ptr<MetricsServer> server = StartOrDie(
      SampleRegistry(), {.readiness = [&ready] {
        return ready.load() ? absl::OkStatus()
                            : absl::UnavailableError("no worker\nis connected");
      }});
  ASSERT_NE(server, nullptr);
  httplib::Result not_ready = Get("127.0.0.1", server->port(), "/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);
  EXPECT_EQ(not_ready->body, "no worker is connected\n") << "one line with the reason";
  ready = true;
  httplib::Result now_ready = Get("127.0.0.1", server->port(), "/readyz");
  ASSERT_TRUE(now_ready);
  EXPECT_EQ(now_ready->status, 200);
  EXPECT_EQ(now_ready->body, "ready\n");
}

TEST(MetricsServerTest, NoReadinessCallbackMeansReady) {
  std::unique_ptr<MetricsServer> server = StartOrDie(SampleRegistry());
  ASSERT_NE(server, nullptr);
  httplib::Result response = Get("127.0.0.1", server->port(), "/readyz");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
}

TEST(MetricsServerTest, BadOptionsAreInvalidArgument) {
  EXPECT_EQ(MetricsServer::Start(SampleRegistry(), {.port = 70000}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Start(SampleRegistry(), {.port = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Start(nullptr, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Eight connections that trickle a partial head (the old server ran four threads: four such
// clients made /healthz, the chart's liveness probe, time out) must not delay /healthz.
TEST(MetricsServerTest, SlowClientsDoNotBlockHealthz) {
  std::unique_ptr<MetricsServer> server = StartOrDie(SampleRegistry());
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<http::testing::RawClient>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<http::testing::RawClient>(server->port()));
    ASSERT_TRUE(slow.back()->Send("GET /healthz HTTP/1.1\r\nX-Slow: "));
  }
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
    const auto start = std::chrono::steady_clock::now();
    httplib::Result response = Get("127.0.0.1", server->port(), path);
    ASSERT_TRUE(response) << path;
    EXPECT_EQ(response->status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << path;
  }
}

TEST(MetricsServerTest, ATakenPortIsUnavailable) {
  std::unique_ptr<MetricsServer> first = StartOrDie(SampleRegistry());
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<MetricsServer>> second =
      MetricsServer::Start(SampleRegistry(), {.port = first->port()});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat(":", first->port())));
}

TEST(MetricsServerTest, StopClosesThePortAndIsIdempotent) {
  std::unique_ptr<MetricsServer> server = StartOrDie(SampleRegistry());
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  ASSERT_TRUE(Get("127.0.0.1", port, "/healthz"));
  server->Stop();
  server->Stop();
  EXPECT_FALSE(Get("127.0.0.1", port, "/healthz"));
}

TEST(MetricsServerTest, StopRightAfterStartDoesNotHang) {
  for (int i = 0; i < 20; ++i) {
    std::unique_ptr<MetricsServer> server = StartOrDie(SampleRegistry());
    ASSERT_NE(server, nullptr);
  }  // each destructor stops its server
}

}  // namespace
}  // namespace tessera::metrics
