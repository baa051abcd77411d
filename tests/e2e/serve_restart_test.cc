// `tessera serve` restarts a worker that died (issue 15, item 5): while it is gone the router
// answers UNAVAILABLE, then serves again on the restarted worker; a restart that fails (its port
// taken) is retried with a doubling backoff; --no-restart keeps the old behaviour (the command
// fails).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
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

// The TCP port `pid` listens on (its listening socket's inode matched in /proc/net/tcp{,6}),
// or -1.
int ListeningPort(int pid) {
  std::set<std::string> inodes;
  for (const auto& fd : std::filesystem::directory_iterator(
           std::filesystem::path("/proc") / std::to_string(pid) / "fd")) {
    std::error_code error;
    const std::string target = std::filesystem::read_symlink(fd.path(), error).string();
    if (!error && target.rfind("socket:[", 0) == 0) {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      if (state == "0A" && inodes.contains(inode)) {
        return std::stoi(local.substr(local.rfind(':') + 1), nullptr, 16);
      }
    }
  }
  return -1;
}

// Binds and listens on 127.0.0.1:port (retrying for up to 5 s while the old owner dies); the
// socket, or -1.
int TakePort(int port) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
        ::listen(fd, 1) == 0) {
      return fd;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
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

  const int worker = process::LiveChildPid(serve.pid(), "tessera-worker");
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
  EXPECT_GT(process::LiveChildPid(serve.pid(), "tessera-worker"), 0);
  // The router counts the restore.
  const std::string& metrics = serve.router_metrics_address();
  httplib::Client client(metrics.substr(0, metrics.rfind(':')),
                         std::stoi(metrics.substr(metrics.rfind(':') + 1)));
  httplib::Result scraped = client.Get("/metrics");
  ASSERT_TRUE(scraped);
  EXPECT_THAT(scraped->body, HasSubstr("\ntessera_worker_restores_total 1\n"));
  EXPECT_EQ(serve.Stop(), 0);
}

// The restart's backoff path: the dead worker's port is taken when tessera serve first tries to
// restart it, so that try fails and the next comes after a doubled backoff (0.5 s, then 1 s);
// once the port is free again the worker comes back and the router serves.
TEST(ServeRestartTest, AFailedRestartIsRetriedWithBackoff) {
  ServeProcess serve;
  ASSERT_TRUE(serve.Start({"--threads", "1", "--kv-cache-mb", "64"}).ok());
  auto stub = v1::Tessera::NewStub(
      grpc::CreateChannel(serve.address(), grpc::InsecureChannelCredentials()));
  const int worker = process::LiveChildPid(serve.pid(), "tessera-worker");
  ASSERT_GT(worker, 0);
  const int port = ListeningPort(worker);
  ASSERT_GT(port, 0);
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  const int blocker = TakePort(port);  // before the first restart try (0.5 s after the death)
  ASSERT_GE(blocker, 0) << "could not take port " << port;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (serve.StderrTail().find("next try in 1s") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_THAT(serve.StderrTail(), HasSubstr("tessera serve: restarting tessera-worker failed"));
  EXPECT_EQ(RunGenerate(*stub, Short()).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  ::close(blocker);
  grpc::Status after = grpc::Status(grpc::StatusCode::UNKNOWN, "not tried");
  for (int i = 0; i < 120 && !after.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    after = RunGenerate(*stub, Short()).status;
  }
  EXPECT_TRUE(after.ok()) << after.error_message() << "\n" << serve.StderrTail();
  EXPECT_THAT(serve.StderrTail(), HasSubstr("tessera serve: restarted tessera-worker on"));
  EXPECT_EQ(ListeningPort(process::LiveChildPid(serve.pid(), "tessera-worker")), port);
  EXPECT_EQ(serve.Stop(), 0);
}

TEST(ServeRestartTest, NoRestartFailsTheCommand) {
  ServeProcess serve;
  ASSERT_TRUE(serve.Start({"--threads", "1", "--kv-cache-mb", "64", "--no-restart"}).ok());
  const int worker = process::LiveChildPid(serve.pid(), "tessera-worker");
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
