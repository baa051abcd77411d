// Data parallel behind one router (router/engine_group.h), real processes on loopback: two cpu
// workers, one router given --worker twice.
//   - concurrent requests spread over both workers (the least-load rule), every one finishes,
//     and /metrics shows each worker's series under its `worker` label;
//   - a client cancelling a request that runs on the second worker cancels it there (everything
//     released);
//   - killing the second worker fails only the requests it was running; the first worker's
//     finish, and new requests go to the worker left;
//   - ServerStats lists each worker beside the sums, ModelInfo each worker's address and device;
//   - --trace-steps writes one trace per worker (PATH.worker-I);
//   - --routing round-robin (for comparisons) takes the workers in turn;
//   - requests sharing a long prompt prefix go to the worker that caches it, though the load rule
//     alone would send them to the other one (prefix hits asserted on that worker).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/unique_temp_path.h"
#include "tests/e2e/metrics_scrape.h"
#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;

class DataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(serving_.StartWorker({"--threads", "1"}).ok());
    ASSERT_TRUE(serving_.StartExtraWorker({"--threads", "1"}).ok());
    std::vector<std::string> router_args = {"--metrics-port", "0", "--trace-steps", trace_};
    for (const std::string& arg : ExtraRouterArgs()) router_args.push_back(arg);
    ASSERT_TRUE(serving_.StartRouter(router_args).ok());
    // Both workers described: each engine's KV capacity is published.
    for (int i = 0; i < 600; ++i) {
      const std::string m = ScrapeMetrics(serving_.router_metrics_address());
      if (SeriesValue(m, "tessera_kv_blocks_capacity{worker=\"0\"}") > 0 &&
          SeriesValue(m, "tessera_kv_blocks_capacity{worker=\"1\"}") > 0) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "the router did not connect both workers";
  }
  virtual std::vector<std::string> ExtraRouterArgs() const { return {}; }
  void TearDown() override {
    for (const char* worker : {".worker-0", ".worker-1"}) std::filesystem::remove(trace_ + worker);
  }
  // --trace-steps: each worker's steps in trace_ + ".worker-I".
  const std::string trace_ = testing_util::UniqueTempPath("data_parallel_trace.jsonl");
  ServingProcesses serving_;
};

// The JSON lines of a step trace file, each parsed (an unparsable line fails the test).
std::vector<nlohmann::json> TraceLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(nlohmann::json::parse(line, nullptr, false));
    EXPECT_TRUE(lines.back().is_object()) << path << ": " << line;
  }
  return lines;
}

TEST_F(DataParallelTest, ConcurrentRequestsSpreadOverBothWorkers) {
  std::vector<v1::GenerateRequest> requests(8, CountingRequest(12));
  const std::vector<StreamResult> results = RunConcurrently(serving_, requests);
  for (const StreamResult& r : results) EXPECT_EQ(r.token_ids.size(), 12u);
  std::string m;
  for (int i = 0; i < 500 && FinishedOn(m, 0) + FinishedOn(m, 1) < 8; ++i) {
    m = ScrapeMetrics(serving_.router_metrics_address());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double first = FinishedOn(m, 0), second = FinishedOn(m, 1);
  EXPECT_EQ(first + second, 8) << m;
  EXPECT_GE(first, 2) << "the least-load rule left worker 0 nearly idle";
  EXPECT_GE(second, 2) << "the least-load rule left worker 1 nearly idle";
  ExpectEverythingReleased(serving_);
  // Each engine traced its own steps: 12 tokens per request, so steps on both workers.
  EXPECT_FALSE(std::filesystem::exists(trace_)) << "one file per worker, none shared";
  for (const std::string worker : {"0", "1"}) {
    const std::vector<nlohmann::json> steps = TraceLines(trace_ + ".worker-" + worker);
    EXPECT_GE(steps.size(), 12u) << "worker " << worker;
  }
}

// ServerStats keeps the sums and lists each worker; ModelInfo lists the workers' addresses and
// devices.
TEST_F(DataParallelTest, ServerStatsAndModelInfoListTheWorkers) {
  for (const StreamResult& r : RunConcurrently(serving_, {CountingRequest(40), CountingRequest(40)})) {
    EXPECT_EQ(r.token_ids.size(), 40u);
  }
  AwaitSeries(serving_.router_metrics_address(),
              "tessera_requests_total{status=\"length\",worker=\"1\"}", 1);
  const v1::ServerStatsResponse stats = serving_.Stats();
  ASSERT_EQ(stats.workers_size(), 2);
  EXPECT_EQ(stats.workers(0).address(), "127.0.0.1:" + std::to_string(serving_.worker_port()));
  EXPECT_NE(stats.workers(1).address(), stats.workers(0).address());
  uint64_t steps = 0;
  int64_t kv_total = 0, kv_cached = 0;
  for (int i = 0; i < 2; ++i) {
    const v1::WorkerStats& w = stats.workers(i);
    EXPECT_EQ(w.index(), i);
    EXPECT_TRUE(w.connected() && w.serving()) << "worker " << i;
    EXPECT_GT(w.steps(), 0u) << "worker " << i << " ran no step";
    EXPECT_GT(w.kv_blocks_total(), 0) << "worker " << i;
    steps += w.steps();
    kv_total += w.kv_blocks_total();
    kv_cached += w.kv_blocks_cached();
  }
  EXPECT_EQ(stats.steps(), steps);
  EXPECT_EQ(stats.kv_blocks_total(), kv_total);
  EXPECT_EQ(stats.kv_blocks_cached(), kv_cached);
  EXPECT_GT(kv_cached, 0) << "each finished prompt leaves its full blocks cached";

  grpc::ClientContext context;
  v1::ModelInfoResponse info;
  ASSERT_TRUE(serving_.NewStub()->ModelInfo(&context, v1::ModelInfoRequest(), &info).ok());
  ASSERT_EQ(info.workers_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(info.workers(i).address(), stats.workers(i).address());
    EXPECT_TRUE(info.workers(i).connected());
    EXPECT_EQ(info.workers(i).backend(), "cpu");
    EXPECT_EQ(info.workers(i).num_kv_blocks(), info.num_kv_blocks());
  }
}

TEST_F(DataParallelTest, CancelReachesTheSecondWorker) {
  // The first request holds worker 0 (the lower index wins the tie), so the second one runs on
  // worker 1; cancelling it must reach that engine.
  auto stub = serving_.NewStub();
  std::thread holder([&] { RunGenerate(*stub, CountingRequest(60)); });
  AwaitSeries(serving_.router_metrics_address(), "tessera_requests_running{worker=\"0\"}", 1);
  StreamResult cancelled = RunGenerate(
      *stub, CountingRequest(400), [](const v1::GenerateResponse&, grpc::ClientContext& context) {
        static int seen = 0;
        if (++seen == 3) context.TryCancel();
      });
  holder.join();
  EXPECT_EQ(cancelled.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(cancelled.token_ids.size(), 400u);
  // The engine records the cancellation after the client's stream has ended.
  const std::string m =
      AwaitSeries(serving_.router_metrics_address(),
                  "tessera_requests_total{status=\"cancelled\",worker=\"1\"}", 1);
  EXPECT_EQ(SeriesValue(m, "tessera_requests_total{status=\"cancelled\",worker=\"1\"}"), 1) << m;
  EXPECT_EQ(SeriesValue(m, "tessera_requests_total{status=\"cancelled\",worker=\"0\"}"), 0) << m;
  ExpectEverythingReleased(serving_);
}

TEST_F(DataParallelTest, ALostWorkerFailsOnlyItsOwnRequests) {
  auto stub = serving_.NewStub();
  std::vector<StreamResult> results(6);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < results.size(); ++i) {
    clients.emplace_back([&, i] { results[i] = RunGenerate(*stub, CountingRequest(150)); });
  }
  // Once every request has produced tokens on both workers, worker 1 goes away.
  for (int i = 0; i < 300; ++i) {
    const std::string m = ScrapeMetrics(serving_.router_metrics_address());
    if (SeriesValue(m, "tessera_requests_running{worker=\"0\"}") >= 1 &&
        SeriesValue(m, "tessera_requests_running{worker=\"1\"}") >= 1) {
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
  const StreamResult after = RunGenerate(*stub, CountingRequest(5));
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.token_ids.size(), 5u);
}

// About 600 tokens of a shared "system prompt", then a question of its own.
v1::GenerateRequest SharedPrefix(int question) {
  std::string system = "You are a careful assistant. Rules:";
  for (int i = 1; i <= 60; ++i) system += " Rule " + std::to_string(i) + ": answer briefly.";
  v1::GenerateRequest request;
  request.set_text(system + " Question " + std::to_string(question) + ": what is " +
                   std::to_string(question) + " plus one?");
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(4);
  return request;
}

TEST_F(DataParallelTest, ASharedPrefixGoesToTheWorkerThatCachesIt) {
  auto stub = serving_.NewStub();
  // Worker 0 is busy, so the first shared-prefix request runs on worker 1 and caches the prefix.
  std::thread holder([&] { RunGenerate(*stub, CountingRequest(120)); });
  AwaitSeries(serving_.router_metrics_address(), "tessera_requests_running{worker=\"0\"}", 1);
  const StreamResult first = RunGenerate(*stub, SharedPrefix(0));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  holder.join();
  std::string m = AwaitSeries(serving_.router_metrics_address(),
                              "tessera_requests_total{status=\"length\",worker=\"0\"}", 1);
  ASSERT_EQ(FinishedOn(m, 1), 1) << "the first shared-prefix request should have run on worker 1";
  // Both idle now: the load rule alone would pick worker 0 (the lower index).
  for (int q = 1; q <= 4; ++q) {
    const StreamResult r = RunGenerate(*stub, SharedPrefix(q));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }
  m = AwaitSeries(serving_.router_metrics_address(),
                  "tessera_requests_total{status=\"length\",worker=\"1\"}", 5);
  EXPECT_EQ(FinishedOn(m, 1), 5) << m;
  const double hits = SeriesValue(m, "tessera_prefix_cache_hits_total{worker=\"1\"}");
  const double queries = SeriesValue(m, "tessera_prefix_cache_queries_total{worker=\"1\"}");
  EXPECT_GT(hits, 0.8 * queries * 4 / 5) << "hits " << hits << " of " << queries;
  ExpectEverythingReleased(serving_);
}

// --routing round-robin (for benchmarks against the rule): the workers in turn, whatever they
// cache, so the shared-prefix requests alternate.
class RoundRobinTest : public DataParallelTest {
 protected:
  std::vector<std::string> ExtraRouterArgs() const override {
    return {"--routing", "round-robin"};
  }
};

TEST_F(RoundRobinTest, TakesTheWorkersInTurnWhateverTheyCache) {
  auto stub = serving_.NewStub();
  for (int q = 0; q < 4; ++q) {
    const StreamResult r = RunGenerate(*stub, SharedPrefix(q));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }
  const std::string m = AwaitSeries(serving_.router_metrics_address(),
                                    "tessera_requests_total{status=\"length\",worker=\"1\"}", 2);
  EXPECT_EQ(FinishedOn(m, 0), 2) << m;
  EXPECT_EQ(FinishedOn(m, 1), 2) << m;
}

}  // namespace
}  // namespace tessera::e2e
