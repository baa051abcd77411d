#include "tools/soak/serve_target.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tessera::soak {
namespace {

namespace v1 = ::tessera::v1;

constexpr char kListening[] = "tessera serve: listening on ";
constexpr char kHttp[] = "tessera serve: http on ";
constexpr char kRouterMetrics[] = "tessera serve: router metrics on ";

}  // namespace

double RssMiB(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, "VmRSS:")) continue;
    std::istringstream fields(line.substr(6));
    double kib = -1;
    fields >> kib;
    return kib < 0 ? -1 : kib / 1024.0;
  }
  return -1;
}

ServeTarget::~ServeTarget() { Stop(); }

absl::Status ServeTarget::Start(const std::string& tessera_path,
                                const std::vector<std::string>& serve_args) {
  std::vector<std::string> args = {"serve", "--port", "0", "--http-port", "-1",
                                   "--metrics-port", "0"};
  args.insert(args.end(), serve_args.begin(), serve_args.end());
  absl::StatusOr<std::unique_ptr<process::ChildProcess>> child = process::ChildProcess::Spawn(
      {.path = tessera_path, .args = args, .name = "tessera serve"});
  if (!child.ok()) return child.status();
  serve_ = *std::move(child);
  while (address_.empty()) {
    absl::StatusOr<std::string> line = serve_->ReadStdoutLine(absl::Seconds(300));
    if (!line.ok()) {
      return absl::UnavailableError(absl::StrCat("tessera serve did not start (",
                                                 line.status().message(), "): ",
                                                 serve_->StderrTail()));
    }
    if (absl::StartsWith(*line, kRouterMetrics)) {
      metrics_address_ = line->substr(sizeof(kRouterMetrics) - 1);
    }
    if (absl::StartsWith(*line, kHttp)) http_address_ = line->substr(sizeof(kHttp) - 1);
    if (absl::StartsWith(*line, kListening)) address_ = line->substr(sizeof(kListening) - 1);
  }
  stub_ = v1::Tessera::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  return absl::OkStatus();
}

std::string ServeTarget::Stop() {
  if (serve_ == nullptr) return "not started";
  (void)serve_->Signal(SIGTERM);
  std::optional<process::ChildExit> exit = serve_->Wait(absl::Seconds(60));
  if (!exit.has_value()) {
    (void)serve_->Signal(SIGKILL);
    exit = serve_->Wait(absl::Seconds(10));
  }
  const std::string result = exit.has_value() ? exit->ToString() : "did not exit";
  serve_.reset();
  return result;
}

bool ServeTarget::Alive() { return serve_ != nullptr && !serve_->Poll().has_value(); }

pid_t ServeTarget::RouterPid() const {
  return serve_ == nullptr ? -1 : process::LiveChildPid(serve_->pid(), "tessera-router");
}

pid_t ServeTarget::WorkerPid() const {
  return serve_ == nullptr ? -1 : process::LiveChildPid(serve_->pid(), "tessera-worker");
}

absl::StatusOr<pid_t> ServeTarget::KillWorker() const {
  const pid_t pid = WorkerPid();
  if (pid <= 0) return absl::NotFoundError("no tessera-worker child is running");
  if (::kill(pid, SIGKILL) != 0) {
    return absl::InternalError(absl::StrCat("kill -9 ", pid, " failed"));
  }
  return pid;
}

v1::ServerStatsResponse ServeTarget::Stats() const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ServerStatsResponse response;
  if (!stub_->ServerStats(&context, v1::ServerStatsRequest(), &response).ok()) return {};
  return response;
}

absl::StatusOr<double> ServeTarget::Metric(const std::string& name) const {
  httplib::Client client(absl::StrCat("http://", metrics_address_));
  client.set_read_timeout(10);
  httplib::Result result = client.Get("/metrics");
  if (!result || result->status != 200) {
    return absl::UnavailableError(absl::StrCat("GET http://", metrics_address_, "/metrics failed"));
  }
  for (absl::string_view line : absl::StrSplit(result->body, '\n')) {
    if (!absl::StartsWith(line, name) || line.size() <= name.size() || line[name.size()] != ' ') {
      continue;
    }
    double value = 0;
    if (absl::SimpleAtod(line.substr(name.size() + 1), &value)) return value;
  }
  return absl::NotFoundError(absl::StrCat(name, " is not in the router's /metrics"));
}

bool ServeTarget::WaitConnected(double timeout_s) const {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < end) {
    if (Stats().worker_connected()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace tessera::soak
