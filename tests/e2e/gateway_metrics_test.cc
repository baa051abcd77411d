// The inference gateway's model-server protocol metrics (router/gateway_metrics.h,
// docs/design/inference-gateway.md), real processes on loopback: two cpu workers behind one router
// with --max-num-seqs 1, so that each worker runs one request and the rest queue.
//   - tessera_num_requests_waiting, tessera_num_requests_running and tessera_kv_cache_usage_perc
//     are one unlabelled series each (no `worker` label: the endpoint picker reads one series per
//     pod), on the metrics port and on the OpenAI HTTP port (which the picker scrapes);
//   - idle: 0, 0, 0;
//   - under load: running = 2 (one per worker) and waiting > 0, each the sum of the per-worker
//     series; the KV utilisation is in (0, 1] and equals the summed used / capacity blocks;
//   - after the load: running and waiting back to 0.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include "tests/e2e/metrics_scrape.h"
#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;

// The values of every line of `metrics` whose series (name and labels) is exactly `series`.
std::vector<double> Values(const std::string& metrics, const std::string& series) {
  std::vector<double> values;
  const std::string prefix = series + " ";
  size_t at = 0;
  while ((at = metrics.find(prefix, at)) != std::string::npos) {
    if (at == 0 || metrics[at - 1] == '\n') {
      const size_t start = at + prefix.size();
      values.push_back(std::stod(metrics.substr(start, metrics.find('\n', start) - start)));
    }
    at += prefix.size();
  }
  return values;
}

// The one value of `series`, or nullopt when it is missing or repeated.
std::optional<double> One(const std::string& metrics, const std::string& series) {
  const std::vector<double> values = Values(metrics, series);
  if (values.size() != 1) return std::nullopt;
  return values.front();
}

double PerWorker(const std::string& metrics, const std::string& name, const std::string& worker) {
  return One(metrics, name + "{worker=\"" + worker + "\"}").value_or(-1);
}

// The pod-level gauges of one scrape, and the per-worker series they sum.
struct PodGauges {
  double waiting = -1, running = -1, kv_usage = -1;
  double waiting_sum = 0, running_sum = 0, used = 0, capacity = 0;
};

PodGauges Read(const std::string& m) {
  PodGauges g;
  g.waiting = One(m, "tessera_num_requests_waiting").value_or(-1);
  g.running = One(m, "tessera_num_requests_running").value_or(-1);
  g.kv_usage = One(m, "tessera_kv_cache_usage_perc").value_or(-1);
  for (const char* w : {"0", "1"}) {
    g.waiting_sum += PerWorker(m, "tessera_requests_waiting", w);
    g.running_sum += PerWorker(m, "tessera_requests_running", w);
    g.used += PerWorker(m, "tessera_kv_blocks_used", w);
    g.capacity += PerWorker(m, "tessera_kv_blocks_capacity", w);
  }
  return g;
}

// The per-worker series and the pod gauges are set one after the other: a scrape in between
// sees them disagree, so "consistent" is what the next scrape (or one soon after) shows.
bool Consistent(const PodGauges& g) {
  return g.waiting == g.waiting_sum && g.running == g.running_sum && g.capacity > 0 &&
         std::abs(g.kv_usage - g.used / g.capacity) < 1e-9;
}

class GatewayMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(serving_.StartWorker({"--threads", "1"}).ok());
    ASSERT_TRUE(serving_.StartExtraWorker({"--threads", "1"}).ok());
    ASSERT_TRUE(
        serving_.StartRouter({"--metrics-port", "0", "--http-port", "-1", "--max-num-seqs", "1"})
            .ok());
    ASSERT_FALSE(serving_.router_http_address().empty()) << "no 'tessera-router http on' line";
    for (int i = 0; i < 600; ++i) {  // both workers described: both capacities published
      const std::string m = ScrapeMetrics(serving_.router_metrics_address());
      if (PerWorker(m, "tessera_kv_blocks_capacity", "0") > 0 &&
          PerWorker(m, "tessera_kv_blocks_capacity", "1") > 0) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "the router did not connect both workers";
  }
  ServingProcesses serving_;
};

TEST_F(GatewayMetricsTest, ProtocolGaugesAreUnlabelledOnBothPortsAndZeroWhenIdle) {
  for (const std::string& address :
       {serving_.router_metrics_address(), serving_.router_http_address()}) {
    const std::string m = ScrapeMetrics(address);
    ASSERT_FALSE(m.empty()) << "no /metrics on " << address;
    for (const char* name : {"tessera_num_requests_waiting", "tessera_num_requests_running",
                             "tessera_kv_cache_usage_perc"}) {
      EXPECT_NE(m.find(std::string("# TYPE ") + name + " gauge\n"), std::string::npos)
          << name << " is not a gauge on " << address;
      EXPECT_EQ(m.find(std::string(name) + "{"), std::string::npos)
          << name << " carries labels on " << address << ": the picker would read one of them";
      EXPECT_EQ(One(m, name), 0.0) << name << " idle on " << address << "\n" << m;
    }
  }
}

TEST_F(GatewayMetricsTest, GaugesFollowTheLoadOfBothWorkers) {
  std::vector<v1::GenerateRequest> requests(6, CountingRequest(120));
  std::vector<StreamResult> results;
  std::thread load([&] { results = RunConcurrently(serving_, requests); });
  PodGauges busy;
  std::string m;
  for (int i = 0; i < 1000; ++i) {  // the HTTP port: what the endpoint picker scrapes
    m = ScrapeMetrics(serving_.router_http_address());
    busy = Read(m);
    if (Consistent(busy) && busy.running == 2 && busy.waiting > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(busy.running, 2) << "one request per worker (--max-num-seqs 1)\n" << m;
  EXPECT_GT(busy.waiting, 0) << "the other requests queue\n" << m;
  EXPECT_EQ(busy.running, busy.running_sum) << m;
  EXPECT_EQ(busy.waiting, busy.waiting_sum) << m;
  EXPECT_GT(busy.kv_usage, 0) << "running requests hold KV blocks\n" << m;
  EXPECT_LE(busy.kv_usage, 1) << m;
  EXPECT_NEAR(busy.kv_usage, busy.used / busy.capacity, 1e-9) << m;
  load.join();
  for (const StreamResult& r : results) EXPECT_EQ(r.token_ids.size(), 120u);
  PodGauges idle;
  for (int i = 0; i < 500; ++i) {
    idle = Read(ScrapeMetrics(serving_.router_metrics_address()));
    if (idle.running == 0 && idle.waiting == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(idle.running, 0);
  EXPECT_EQ(idle.waiting, 0);
  EXPECT_GE(idle.kv_usage, 0);
  EXPECT_LE(idle.kv_usage, 1);
}

}  // namespace
}  // namespace tessera::e2e
