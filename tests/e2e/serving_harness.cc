#include "tests/e2e/serving_harness.h"

#include <csignal>
#include <future>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/testing/bin_dir.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;

// Spawns build/bin/<binary> and waits for "<binary> listening on HOST:PORT"; returns HOST:PORT.
// A "<binary> metrics on HOST:PORT" line before it (--metrics-port) lands in *metrics_address,
// a "<binary> http on HOST:PORT" line (the router's --http-port) in *http_address when given.
absl::StatusOr<std::string> SpawnAndWaitReady(const std::string& binary,
                                              std::vector<std::string> args,
                                              std::unique_ptr<process::ChildProcess>* child,
                                              std::string* metrics_address,
                                              std::string* http_address = nullptr) {
  absl::StatusOr<std::unique_ptr<process::ChildProcess>> spawned = process::ChildProcess::Spawn(
      {.path = absl::StrCat(testing_util::TesseraBinDir(), "/", binary),
       .args = std::move(args),
       .echo_stderr_fd = 2});
  if (!spawned.ok()) return spawned.status();
  *child = std::move(*spawned);
  const std::regex ready(binary + " listening on (\\S+)");
  const std::regex metrics(binary + " metrics on (\\S+)");
  const std::regex http(binary + " http on (\\S+)");
  for (;;) {
    absl::StatusOr<std::string> line = (*child)->ReadStdoutLine(absl::Seconds(120));
    if (!line.ok()) {
      return absl::Status(line.status().code(),
                          absl::StrCat(binary, " never became ready: ", line.status().message(),
                                       "; stderr: ", (*child)->StderrTail()));
    }
    std::smatch match;
    if (std::regex_search(*line, match, metrics)) *metrics_address = match[1].str();
    if (http_address != nullptr && std::regex_search(*line, match, http)) {
      *http_address = match[1].str();
    }
    if (std::regex_search(*line, match, ready)) return match[1].str();
  }
}

}  // namespace

ServingProcesses::~ServingProcesses() = default;  // ChildProcess SIGKILLs and reaps

absl::Status ServingProcesses::StartWorker(const std::vector<std::string>& extra_args, int port) {
  // 256 MiB of KV (~5.8K tokens of the default model) is plenty here and keeps several workers
  // cheap on a small CI machine.
  std::vector<std::string> args = {"--model", model_, "--listen",
                                   absl::StrCat("127.0.0.1:", port), "--kv-cache-mb", "256"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  absl::StatusOr<std::string> address =
      SpawnAndWaitReady("tessera-worker", args, &worker_, &worker_metrics_address_);
  if (!address.ok()) return address.status();
  worker_address_ = *address;
  worker_port_ = std::stoi(worker_address_.substr(worker_address_.rfind(':') + 1));
  return absl::OkStatus();
}

absl::Status ServingProcesses::StartExtraWorker(const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {"--model", model_, "--listen", "127.0.0.1:0",
                                   "--kv-cache-mb", "256"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::unique_ptr<process::ChildProcess> worker;
  std::string unused_metrics_address;
  absl::StatusOr<std::string> address =
      SpawnAndWaitReady("tessera-worker", args, &worker, &unused_metrics_address);
  if (!address.ok()) return address.status();
  extra_workers_.push_back(std::move(worker));
  extra_worker_addresses_.push_back(*address);
  return absl::OkStatus();
}

void ServingProcesses::KillExtraWorker(size_t index) {
  if (index >= extra_workers_.size() || extra_workers_[index] == nullptr) return;
  (void)extra_workers_[index]->Signal(SIGKILL);
  extra_workers_[index]->Wait(absl::Seconds(10));
  extra_workers_[index].reset();
}

absl::Status ServingProcesses::StartRouter(const std::vector<std::string>& extra_args) {
  // No HTTP API unless a test asks (--http-port -1): tests run in parallel, 8080 is shared.
  std::vector<std::string> args = {"--model", model_, "--worker", worker_address_,
                                   "--listen", "127.0.0.1:0", "--http-port", "0"};
  for (const std::string& address : extra_worker_addresses_) {
    args.insert(args.end(), {"--worker", address});
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  absl::StatusOr<std::string> address =
      SpawnAndWaitReady("tessera-router", args, &router_, &router_metrics_address_,
                        &router_http_address_);
  if (!address.ok()) return address.status();
  router_address_ = *address;
  return absl::OkStatus();
}

absl::Status ServingProcesses::WaitConnected(double timeout_s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    if (Stats().worker_connected()) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError("the router did not connect to the worker");
}

absl::Status ServingProcesses::Start(const std::vector<std::string>& worker_args,
                                     const std::vector<std::string>& router_args) {
  absl::Status status = StartWorker(worker_args);
  if (status.ok()) status = StartRouter(router_args);
  if (status.ok()) status = WaitConnected();
  return status;
}

std::string ServingProcesses::RouterStderrTail() const {
  return router_ == nullptr ? stopped_router_stderr_tail_ : router_->StderrTail();
}

void ServingProcesses::KillWorker() {
  if (worker_ == nullptr) return;
  (void)worker_->Signal(SIGKILL);
  worker_->Wait(absl::Seconds(10));
  worker_.reset();
}

int ServingProcesses::StopRouter(double timeout_s) {
  if (router_ == nullptr) return -1;
  (void)router_->Signal(SIGTERM);
  std::optional<process::ChildExit> exit = router_->Wait(absl::Seconds(timeout_s));
  stopped_router_stderr_tail_ = router_->StderrTail();
  router_.reset();
  return exit.has_value() ? exit->exit_code : -1;
}

std::unique_ptr<v1::Tessera::Stub> ServingProcesses::NewStub() const {
  return v1::Tessera::NewStub(
      grpc::CreateChannel(router_address_, grpc::InsecureChannelCredentials()));
}

v1::ServerStatsResponse ServingProcesses::Stats() const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ServerStatsResponse stats;
  const grpc::Status status = NewStub()->ServerStats(&context, v1::ServerStatsRequest(), &stats);
  // A failed call would return all zeros, which "everything released" checks would accept.
  EXPECT_TRUE(status.ok()) << "ServerStats: " << status.error_message();
  return stats;
}

ServingProcesses* SharedServingTest::serving_ = nullptr;
absl::Status* SharedServingTest::start_status_ = nullptr;

// No ASSERT here: the status is recorded and every test fails on it in SetUp (tests/README.md).
void SharedServingTest::SetUpTestSuite() {
  serving_ = new ServingProcesses();
  start_status_ = new absl::Status(serving_->Start({"--threads", "2"}));
}

void SharedServingTest::TearDownTestSuite() {
  delete serving_;
  delete start_status_;
  serving_ = nullptr;
  start_status_ = nullptr;
}

void SharedServingTest::SetUp() {
  ASSERT_NE(start_status_, nullptr);
  ASSERT_TRUE(start_status_->ok()) << "starting tessera-worker + tessera-router: "
                                   << *start_status_;
}

void ExpectEverythingReleased(const ServingProcesses& serving) {
  v1::ServerStatsResponse stats;
  for (int i = 0; i < 100; ++i) {
    stats = serving.Stats();
    if (stats.kv_blocks_used() == 0 && stats.worker_active_slots() == 0 &&
        stats.requests_running() == 0 && stats.requests_waiting() == 0) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "still held after 5 s: " << stats.ShortDebugString();
}

StreamResult RunGenerate(
    v1::Tessera::Stub& stub, const v1::GenerateRequest& request,
    const std::function<void(const v1::GenerateResponse&, grpc::ClientContext&)>& on_response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub.Generate(&context, request);
  StreamResult result;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    ++result.num_responses;
    result.text += response.text();
    result.token_ids.insert(result.token_ids.end(), response.token_ids().begin(),
                            response.token_ids().end());
    result.logprobs.insert(result.logprobs.end(), response.logprobs().begin(),
                           response.logprobs().end());
    if (on_response) on_response(response, context);
    result.last = response;
  }
  result.status = reader->Finish();
  return result;
}

std::vector<StreamResult> RunConcurrently(const ServingProcesses& serving,
                                          const std::vector<v1::GenerateRequest>& requests) {
  std::vector<std::future<StreamResult>> futures;
  for (const v1::GenerateRequest& r : requests) {
    futures.push_back(std::async(std::launch::async, [&serving, r] {
      auto stub = serving.NewStub();
      return RunGenerate(*stub, r);
    }));
  }
  std::vector<StreamResult> results;
  for (auto& f : futures) {
    results.push_back(f.get());
    EXPECT_TRUE(results.back().status.ok()) << results.back().status.error_message();
  }
  return results;
}

::tessera::v1::GenerateRequest CountingRequest(int max_tokens) {
  ::tessera::v1::GenerateRequest request;
  request.set_text("Count from one to one thousand:");
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  return request;
}

}  // namespace tessera::e2e
