// `tessera serve --workers N` (tools/cli/serve_workers.h): the supervisor starts N tessera-worker
// children and hands every address to the router, so one service spreads requests over them; a
// worker killed is restarted on its own while the others keep serving; bad --workers
// combinations are one-line errors.
#include <signal.h>

#include <algorithm>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/process/child_process.h"
#include "tests/e2e/metrics_scrape.h"
#include "tests/e2e/serve_process.h"
#include "tests/e2e/serving_harness.h"
#include "tests/e2e/tessera_cli_process.h"
#include "kernels/cuda/device_query.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;
using ::testing::HasSubstr;

// Runs `n` requests of `max_tokens` at once; the results in order.
std::vector<StreamResult> RunAtOnce(v1::Tessera::Stub& stub, int n, int max_tokens) {
  std::vector<StreamResult> results(static_cast<size_t>(n));
  std::vector<std::thread> clients;
  for (size_t i = 0; i < results.size(); ++i) {
    clients.emplace_back([&, i] { results[i] = RunGenerate(stub, CountingRequest(max_tokens)); });
  }
  for (std::thread& t : clients) t.join();
  return results;
}

// Polls the router's /metrics (up to 10 s) until workers 0 and 1 have finished at least
// `first` and `second` requests; the last scrape.
std::string AwaitFinished(const std::string& address, double first, double second) {
  std::string m;
  for (int i = 0; i < 500; ++i) {
    m = ScrapeMetrics(address);
    if (FinishedOn(m, 0) >= first && FinishedOn(m, 1) >= second) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return m;
}

class ServeWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(serve_.Start({"--workers", "2", "--device", "cpu", "--threads", "1",
                              "--kv-cache-mb", "64", "--metrics-port", "0",
                              "--worker-metrics-port", "0"})
                    .ok());
    stub_ = v1::Tessera::NewStub(
        grpc::CreateChannel(serve_.address(), grpc::InsecureChannelCredentials()));
  }
  ServeProcess serve_;
  std::unique_ptr<v1::Tessera::Stub> stub_;
};

TEST_F(ServeWorkersTest, BothWorkersServeAndAKilledOneIsRestartedAlone) {
  // One "worker metrics on" line per worker, each its own server.
  ASSERT_EQ(serve_.worker_metrics_addresses().size(), 2u);
  EXPECT_NE(serve_.worker_metrics_addresses()[0], serve_.worker_metrics_addresses()[1]);
  for (const StreamResult& r : RunAtOnce(*stub_, 6, 8)) EXPECT_TRUE(r.status.ok());
  std::string m = AwaitFinished(serve_.router_metrics_address(), 1, 1);
  EXPECT_GE(FinishedOn(m, 0), 1) << m;
  EXPECT_GE(FinishedOn(m, 1), 1) << m;

  // Two long streams, one on each worker; then one worker child dies.
  std::vector<StreamResult> streams(2);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < streams.size(); ++i) {
    clients.emplace_back([&, i] { streams[i] = RunGenerate(*stub_, CountingRequest(150)); });
  }
  AwaitSeries(serve_.router_metrics_address(), "tessera_requests_running{worker=\"1\"}", 1);
  const int victim = process::LiveChildPid(serve_.pid(), "tessera-worker");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  for (std::thread& t : clients) t.join();
  const int finished = (streams[0].status.ok() ? 1 : 0) + (streams[1].status.ok() ? 1 : 0);
  EXPECT_EQ(finished, 1) << "the other worker's stream must finish, the killed one's fail";

  // The supervisor restarts the dead one (and only it) on its port; then both serve again.
  const std::regex restarted("restarted tessera-worker (\\d) on");
  std::smatch match;
  for (int i = 0; i < 600; ++i) {
    const std::string tail = serve_.StderrTail();
    if (std::regex_search(tail, match, restarted)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(match.empty()) << serve_.StderrTail();
  EXPECT_THAT(serve_.StderrTail(),
              HasSubstr("tessera-worker " + match[1].str() + " exited unexpectedly"));
  AwaitSeries(serve_.router_metrics_address(),
              "tessera_worker_restores_total{worker=\"" + match[1].str() + "\"}", 1);
  const double before_0 = FinishedOn(ScrapeMetrics(serve_.router_metrics_address()), 0);
  const double before_1 = FinishedOn(ScrapeMetrics(serve_.router_metrics_address()), 1);
  for (const StreamResult& r : RunAtOnce(*stub_, 4, 8)) EXPECT_TRUE(r.status.ok());
  m = AwaitFinished(serve_.router_metrics_address(), before_0 + 1, before_1 + 1);
  EXPECT_GE(FinishedOn(m, 0), before_0 + 1) << m;
  EXPECT_GE(FinishedOn(m, 1), before_1 + 1) << m;
  EXPECT_EQ(serve_.Stop(), 0);
}

// --workers out of range, and more workers than CUDA devices (or none visible), are one-line
// errors.
TEST(ServeWorkersFlags, BadCombinationsAreOneLineErrors) {
  absl::StatusOr<std::vector<cuda::CudaDeviceInfo>> gpus = cuda::QueryCudaDevices();
  const std::string too_few = !gpus.ok() ? "--device cuda: " : "needs 9 CUDA devices";
  for (const auto& [args, error] :
       {std::pair{std::vector<std::string>{"--workers", "0"},
                  std::string("--workers 0 is not >= 1")},
        std::pair{std::vector<std::string>{"--workers", "9", "--device", "cuda"}, too_few},
        std::pair{std::vector<std::string>{"--workers", "3", "--worker-metrics-port", "65534"},
                  std::string("passes port 65535")}}) {
    std::vector<std::string> argv = {"serve", "--port", "0", "--http-port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::unique_ptr<process::ChildProcess> serve = SpawnTessera(argv);
    ASSERT_NE(serve, nullptr);
    const std::optional<process::ChildExit> exit = serve->Wait(absl::Seconds(60));
    ASSERT_TRUE(exit.has_value()) << "tessera serve kept running with " << args[0];
    const std::string err = serve->StderrTail();
    EXPECT_EQ(exit->exit_code, 1) << err;
    EXPECT_THAT(err, HasSubstr(error));
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
}

}  // namespace
}  // namespace tessera::e2e
