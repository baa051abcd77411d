// Data parallel behind one router (router/engine_group.h), real processes on loopback: two cpu
// workers, one router given --worker twice.
//   - concurrent requests spread over both workers (the least-load rule), every one finishes,
//     and /metrics shows each worker's series under its `worker` label;
//   - a client cancelling a request that runs on the second worker cancels it there (everything
//     released);
//   - killing the second worker fails only the requests it was running; the first worker's
//     finish, and new requests go to the worker left.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;

v1::GenerateRequest Counting(int max_tokens) {
  v1::GenerateRequest request;
  request.set_text("Count from one to one thousand:");
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  return request;
}

std::string Metrics(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  httplib::Client client(host_port.substr(0, colon), std::stoi(host_port.substr(colon + 1)));
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  httplib::Result result = client.Get("/metrics");
  return result && result->status == 200 ? result->body : "";
}

// The value of the first /metrics line that starts with `series` (-1 when there is none).
double Value(const std::string& metrics, const std::string& series) {
  size_t at = 0;
  while ((at = metrics.find(series, at)) != std::string::npos) {
    if (at == 0 || metrics[at - 1] == '\n') {
      const size_t space = metrics.find(' ', at + series.size());
      return std::stod(metrics.substr(space + 1, metrics.find('\n', space) - space - 1));
    }
    at += series.size();
  }
  return -1;
}

double Finished(const std::string& metrics, const std::string& worker) {
  return Value(metrics, "tessera_requests_total{status=\"length\",worker=\"" + worker + "\"}");
}

class DataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(serving_.StartWorker({"--threads", "1"}).ok());
    ASSERT_TRUE(serving_.StartExtraWorker({"--threads", "1"}).ok());
    ASSERT_TRUE(serving_.StartRouter({"--metrics-port", "0"}).ok());
    // Both workers described: each engine's KV capacity is published.
    for (int i = 0; i < 600; ++i) {
      const std::string m = Metrics(serving_.router_metrics_address());
      if (Value(m, "tessera_kv_blocks_capacity{worker=\"0\"}") > 0 &&
          Value(m, "tessera_kv_blocks_capacity{worker=\"1\"}") > 0) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "the router did not connect both workers";
  }
  ServingProcesses serving_;
};

TEST_F(DataParallelTest, ConcurrentRequestsSpreadOverBothWorkers) {
  std::vector<v1::GenerateRequest> requests(8, Counting(12));
  const std::vector<StreamResult> results = RunConcurrently(serving_, requests);
  for (const StreamResult& r : results) EXPECT_EQ(r.token_ids.size(), 12u);
  const std::string m = Metrics(serving_.router_metrics_address());
  const double first = Finished(m, "0"), second = Finished(m, "1");
  EXPECT_EQ(first + second, 8) << m;
  EXPECT_GE(first, 2) << "the least-load rule left worker 0 nearly idle";
  EXPECT_GE(second, 2) << "the least-load rule left worker 1 nearly idle";
  ExpectEverythingReleased(serving_);
}

TEST_F(DataParallelTest, CancelReachesTheSecondWorker) {
  // The first request holds worker 0 (the lower index wins the tie), so the second one runs on
  // worker 1; cancelling it must reach that engine.
  auto stub = serving_.NewStub();
  std::thread holder([&] { RunGenerate(*stub, Counting(60)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  StreamResult cancelled = RunGenerate(
      *stub, Counting(400), [](const v1::GenerateResponse&, grpc::ClientContext& context) {
        static int seen = 0;
        if (++seen == 3) context.TryCancel();
      });
  holder.join();
  EXPECT_EQ(cancelled.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(cancelled.token_ids.size(), 400u);
  const std::string m = Metrics(serving_.router_metrics_address());
  EXPECT_EQ(Value(m, "tessera_requests_total{status=\"cancelled\",worker=\"1\"}"), 1) << m;
  ExpectEverythingReleased(serving_);
}

TEST_F(DataParallelTest, ALostWorkerFailsOnlyItsOwnRequests) {
  auto stub = serving_.NewStub();
  std::vector<StreamResult> results(6);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < results.size(); ++i) {
    clients.emplace_back([&, i] { results[i] = RunGenerate(*stub, Counting(150)); });
  }
  // Once every request has produced tokens on both workers, worker 1 goes away.
  for (int i = 0; i < 300; ++i) {
    const std::string m = Metrics(serving_.router_metrics_address());
    if (Value(m, "tessera_requests_running{worker=\"0\"}") >= 1 &&
        Value(m, "tessera_requests_running{worker=\"1\"}") >= 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  serving_.KillExtraWorker(0);
  for (std::thread& t : clients) t.join();
  int finished = 0, failed = 0;
  for (const StreamResult& r : results) {
    if (r.status.ok()) {
      EXPECT_EQ(r.token_ids.size(), 150u);
      ++finished;
    } else {
      ++failed;
    }
  }
  EXPECT_GE(finished, 1) << "worker 0's requests must finish";
  EXPECT_GE(failed, 1) << "worker 1's requests were running when it was killed";
  // New requests go to the worker left.
  const StreamResult after = RunGenerate(*stub, Counting(5));
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.token_ids.size(), 5u);
}

}  // namespace
}  // namespace tessera::e2e
