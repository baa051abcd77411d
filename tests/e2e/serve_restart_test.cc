// `tessera serve` restarts a worker that died (issue 15, item 5): while it is gone the router
// answers UNAVAILABLE, then serves again on the restarted worker; --no-restart keeps the old
// behaviour (the command fails).
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/e2e/serve_process.h"
#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;
using ::testing::HasSubstr;
using ::testing::Not;

// The pid of `parent`'s child named `name` (from /proc), or -1.
int ChildPid(int parent, const std::string& name) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string comm = line.substr(open + 1, close - open - 1);
    int ppid = -1;
    char state = 0;
    std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid);
    if (ppid == parent && name.rfind(comm, 0) == 0) return std::stoi(pid);
  }
  return -1;
}

v1::GenerateRequest Short() {
  v1::GenerateRequest request;
  request.set_text("Hello");
  request.set_max_tokens(2);
  return request;
}

TEST(ServeRestartTest, ADeadWorkerIsRestarted) {
  ServeProcess serve;
  ASSERT_TRUE(serve.Start({"--threads", "1", "--kv-cache-mb", "64", "--metrics-port", "0"}).ok());
  auto stub = v1::Tessera::NewStub(
      grpc::CreateChannel(serve.address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(RunGenerate(*stub, Short()).status.ok());

  const int worker = ChildPid(serve.pid(), "tessera-worker");
  ASSERT_GT(worker, 0);
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  // Right after the kill: UNAVAILABLE (not a hang, not a crash).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const StreamResult during = RunGenerate(*stub, Short());
  EXPECT_EQ(during.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << during.status.error_message();
  // Then served again by the restarted worker.
  grpc::Status after = grpc::Status(grpc::StatusCode::UNKNOWN, "not tried");
  for (int i = 0; i < 120 && !after.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    after = RunGenerate(*stub, Short()).status;
  }
  EXPECT_TRUE(after.ok()) << after.error_message() << "\n" << serve.StderrTail();
  EXPECT_THAT(serve.StderrTail(), HasSubstr("tessera serve: restarted tessera-worker"));
  EXPECT_GT(ChildPid(serve.pid(), "tessera-worker"), 0);
  // The router counts the restore.
  const std::string& metrics = serve.router_metrics_address();
  httplib::Client client(metrics.substr(0, metrics.rfind(':')),
                         std::stoi(metrics.substr(metrics.rfind(':') + 1)));
  httplib::Result scraped = client.Get("/metrics");
  ASSERT_TRUE(scraped);
  EXPECT_THAT(scraped->body, HasSubstr("\ntessera_worker_restores_total 1\n"));
  EXPECT_EQ(serve.Stop(), 0);
}

TEST(ServeRestartTest, NoRestartFailsTheCommand) {
  ServeProcess serve;
  ASSERT_TRUE(serve.Start({"--threads", "1", "--kv-cache-mb", "64", "--no-restart"}).ok());
  const int worker = ChildPid(serve.pid(), "tessera-worker");
  ASSERT_GT(worker, 0);
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the supervisor polls every 200 ms
  const std::string stderr_tail = serve.StderrTail();
  EXPECT_THAT(stderr_tail, HasSubstr("exited unexpectedly"));
  EXPECT_THAT(stderr_tail, Not(HasSubstr("restarting it")));
  EXPECT_NE(serve.Stop(), 0);
}

}  // namespace
}  // namespace tessera::e2e
