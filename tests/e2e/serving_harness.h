// Test harness: tessera-worker and tessera-router from build/bin as real child processes on
// loopback (port 0, the ports read from their "listening on" lines), plus a client stub and a
// helper that runs one Generate stream to the end.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "common/process/child_process.h"
#include "tessera/v1/tessera.grpc.pb.h"

namespace tessera::e2e {

inline constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

class ServingProcesses {
 public:
  ~ServingProcesses();  // SIGKILLs what is still running

  // The GGUF both processes load (default: the default model). Call before starting them.
  void set_model(std::string path) { model_ = std::move(path); }
  // `port` 0 = any free port. Blocks until the process prints its listening line.
  absl::Status StartWorker(const std::vector<std::string>& extra_args = {}, int port = 0);
  absl::Status StartRouter(const std::vector<std::string>& extra_args = {});
  // Waits until the router reports a connected worker (ServerStats).
  absl::Status WaitConnected(double timeout_s = 60);
  // StartWorker, StartRouter and WaitConnected.
  absl::Status Start(const std::vector<std::string>& worker_args,
                     const std::vector<std::string>& router_args = {});
  void KillWorker();
  // Data parallel: another worker (before StartRouter; the router gets a --worker for each, after
  // the first one's). KillExtraWorker(i) SIGKILLs the i-th of them.
  absl::Status StartExtraWorker(const std::vector<std::string>& extra_args = {});
  void KillExtraWorker(size_t index);
  // SIGTERM to the router; its exit code (-1 if it had to be killed after `timeout_s`).
  int StopRouter(double timeout_s = 30);

  const std::string& router_address() const { return router_address_; }
  // HOST:PORT from the "metrics on" line; empty unless started with --metrics-port.
  const std::string& router_metrics_address() const { return router_metrics_address_; }
  const std::string& worker_metrics_address() const { return worker_metrics_address_; }
  // HOST:PORT from the "http on" line; empty unless started with --http-port -1 (or a port).
  const std::string& router_http_address() const { return router_http_address_; }
  int worker_port() const { return worker_port_; }
  std::unique_ptr<::tessera::v1::Tessera::Stub> NewStub() const;
  ::tessera::v1::ServerStatsResponse Stats() const;
  // The last bytes the router wrote to stderr ("" before StartRouter; after StopRouter, what it
  // wrote up to its exit).
  std::string RouterStderrTail() const;

 private:
  std::string model_ = kDefaultModel;
  std::unique_ptr<process::ChildProcess> worker_;
  std::vector<std::unique_ptr<process::ChildProcess>> extra_workers_;
  std::vector<std::string> extra_worker_addresses_;
  std::unique_ptr<process::ChildProcess> router_;
  std::string worker_address_;
  int worker_port_ = 0;
  std::string router_address_;
  std::string worker_metrics_address_;
  std::string router_metrics_address_;
  std::string router_http_address_;
  std::string stopped_router_stderr_tail_;
};

// A test suite whose tests share one worker + router pair (default model, 2 worker threads),
// started once for the suite. A failed start fails every test with the reason (SetUp).
class SharedServingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;
  static ServingProcesses* serving_;
  static absl::Status* start_status_;
};

// Polls ServerStats until nothing is held: no running or waiting request, no used KV block, no
// live worker slot; a test failure naming what is still held after 5 s.
void ExpectEverythingReleased(const ServingProcesses& serving);

struct StreamResult {
  grpc::Status status;
  std::vector<int32_t> token_ids;
  std::vector<::tessera::v1::TokenLogprob> logprobs;  // one per token, when the request asked
  std::string text;
  int num_responses = 0;
  ::tessera::v1::GenerateResponse last;
};

// Runs `request` to the end of its stream. `on_response` (optional) sees every response with the
// call's context (e.g. to cancel).
// A greedy request that counts up for `max_tokens` tokens whatever the model would stop at
// (ignore_eos): a long, predictable stream for load, cancellation and loss tests.
::tessera::v1::GenerateRequest CountingRequest(int max_tokens);

StreamResult RunGenerate(
    ::tessera::v1::Tessera::Stub& stub, const ::tessera::v1::GenerateRequest& request,
    const std::function<void(const ::tessera::v1::GenerateResponse&, grpc::ClientContext&)>&
        on_response = nullptr);

// Runs every request on its own stream at once (one client thread each); the results in request
// order. A stream that did not end OK is a test failure naming its error.
std::vector<StreamResult> RunConcurrently(
    const ServingProcesses& serving, const std::vector<::tessera::v1::GenerateRequest>& requests);

}  // namespace tessera::e2e
