// Metrics end to end: tessera-worker and tessera-router with --metrics-port as real processes,
// a few Generate requests, then the real Prometheus server (Debian `prometheus`) scraping both
// every second; PromQL over its HTTP API must agree with what the clients saw. `promtool check
// metrics` must accept both expositions without a single lint problem. /healthz and /readyz are
// checked on both processes, and the router's readiness follows its worker. `tessera serve
// --workers 2 --metrics-port 0` is one scrape target: the router's /metrics carries both
// workers' series, labelled worker="I", and the same PromQL agrees over it alone.
//
// Prometheus and promtool come from scripts/install_deps.sh; a missing binary FAILS the test
// (never a silent skip), with a message saying so.
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/serve_process.h"
#include "tests/e2e/serving_harness.h"
#include "tests/unique_temp_path.h"
#include "tools/convert/tiny_model.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;
using ::testing::HasSubstr;

constexpr char kInstallHint[] = " is not installed: run scripts/install_deps.sh";

struct Address {
  std::string host;
  int port = 0;
};

Address Split(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  return {host_port.substr(0, colon), std::stoi(host_port.substr(colon + 1))};
}

httplib::Result HttpGet(const Address& address, const std::string& path,
                        const httplib::Params& params = {}) {
  httplib::Client client(address.host, address.port);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  return client.Get(path, params, httplib::Headers{});
}

// `name` on $PATH (the harness's ChildProcess does no PATH search).
std::optional<std::string> FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (const absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    const std::filesystem::path candidate = std::filesystem::path(std::string(dir)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return std::nullopt;
}

// A loopback port that was free a moment ago (Prometheus takes no port 0 it could report).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// `promtool check metrics` with `exposition` on its stdin.
CommandResult PromtoolCheck(const std::string& promtool, const std::string& exposition,
                            const std::filesystem::path& dir, const std::string& name) {
  const std::filesystem::path file = dir / (name + ".prom");
  std::ofstream(file) << exposition;
  const std::string command =
      absl::StrCat("'", promtool, "' check metrics < '", file.string(), "' 2>&1");
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A fresh directory under the test temp dir, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / "tessera_metrics_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The real Prometheus server scraping the router and the worker (when given) every second.
class PrometheusServer {
 public:
  absl::Status Start(const std::string& binary, const std::filesystem::path& dir,
                     const std::string& router_target, const std::string& worker_target) {
    const std::filesystem::path config = dir / "prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                          << "scrape_configs:\n"
                          << "  - job_name: tessera-router\n    static_configs:\n"
                          << "      - targets: ['" << router_target << "']\n";
    if (!worker_target.empty()) {  // "": the router's /metrics carries the workers' series
      std::ofstream(config, std::ios::app) << "  - job_name: tessera-worker\n    static_configs:\n"
                                           << "      - targets: ['" << worker_target << "']\n";
    }
    address_ = {"127.0.0.1", FreePort()};
    absl::StatusOr<std::unique_ptr<process::ChildProcess>> child = process::ChildProcess::Spawn(
        {.path = binary,
         .args = {absl::StrCat("--config.file=", config.string()),
                  absl::StrCat("--storage.tsdb.path=", (dir / "data").string()),
                  absl::StrCat("--web.listen-address=127.0.0.1:", address_.port),
                  "--log.level=warn"},
         .name = "prometheus",
         .echo_stderr_fd = 2});
    if (!child.ok()) return child.status();
    child_ = std::move(*child);
    return WaitReady();
  }

  // Instant PromQL query; every sample's value (empty when the query matches nothing).
  absl::StatusOr<std::vector<double>> Query(const std::string& promql) const {
    httplib::Result response = HttpGet(address_, "/api/v1/query", {{"query", promql}});
    if (!response) return absl::UnavailableError("prometheus did not answer");
    const nlohmann::json body = nlohmann::json::parse(response->body, nullptr, false);
    if (response->status != 200 || body.is_discarded() || body.value("status", "") != "success") {
      return absl::InternalError(absl::StrCat(promql, ": ", response->body));
    }
    std::vector<double> values;
    for (const nlohmann::json& sample : body["data"]["result"]) {
      values.push_back(std::stod(sample["value"][1].get<std::string>()));
    }
    return values;
  }

  // The single value of `promql`, polling until it has one (scrapes take a moment).
  std::optional<double> Scalar(const std::string& promql) const {
    for (int i = 0; i < 100; ++i) {
      absl::StatusOr<std::vector<double>> values = Query(promql);
      if (values.ok() && values->size() == 1) return values->front();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return std::nullopt;
  }

 private:
  absl::Status WaitReady() {
    for (int i = 0; i < 300; ++i) {
      httplib::Result ready = HttpGet(address_, "/-/ready");
      if (ready && ready->status == 200) return absl::OkStatus();
      if (std::optional<process::ChildExit> exit = child_->Poll(); exit.has_value()) {
        return absl::InternalError(absl::StrCat("prometheus exited (", exit->ToString(),
                                                "): ", child_->StderrTail()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return absl::DeadlineExceededError("prometheus did not become ready in 30 s");
  }

  Address address_;
  std::unique_ptr<process::ChildProcess> child_;  // SIGKILLed by its destructor
};

v1::GenerateRequest Greedy(const std::string& text, int max_tokens) {
  v1::GenerateRequest request;
  request.set_text(text);
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);  // every request finishes by length
  return request;
}

struct Sent {
  int num_requests = 0;
  int64_t completion_tokens = 0;
  int64_t prompt_tokens = 0;
};

// Four requests; two share a prompt prefix of several KV blocks (sent one after the other, so a
// prefix cache can serve the second from the first's blocks).
Sent SendRequests(v1::Tessera::Stub& stub) {
  const std::string shared =
      "You are a careful assistant. Answer in one short sentence, plainly, without lists, "
      "without greetings, and without repeating the question. Keep every answer factual, "
      "friendly and under twenty words. ";
  const std::vector<v1::GenerateRequest> requests = {
      Greedy(shared + "What is the capital of France?", 6),
      Greedy(shared + "What is the capital of Italy?", 7),
      Greedy("Write one sentence about the sea.", 5),
      Greedy("Name three colors.", 4)};
  Sent sent;
  for (const v1::GenerateRequest& request : requests) {
    StreamResult result = RunGenerate(stub, request);
    EXPECT_TRUE(result.status.ok()) << result.status.error_message();
    EXPECT_EQ(result.last.finish_reason(), v1::FINISH_REASON_LENGTH);
    ++sent.num_requests;
    sent.completion_tokens += result.last.usage().completion_tokens();
    sent.prompt_tokens += result.last.usage().prompt_tokens();
  }
  return sent;
}

void ExpectHealthy(const std::string& metrics_address) {
  httplib::Result health = HttpGet(Split(metrics_address), "/healthz");
  ASSERT_TRUE(health) << metrics_address;
  EXPECT_EQ(health->status, 200);
  httplib::Result ready = HttpGet(Split(metrics_address), "/readyz");
  ASSERT_TRUE(ready) << metrics_address;
  EXPECT_EQ(ready->status, 200) << ready->body;
}

// Fetches /metrics and lints it with promtool: exit 0 and nothing printed.
void ExpectPromtoolAccepts(const std::string& promtool, const std::string& metrics_address,
                           const std::filesystem::path& dir, const std::string& name) {
  httplib::Result metrics = HttpGet(Split(metrics_address), "/metrics");
  ASSERT_TRUE(metrics) << metrics_address;
  ASSERT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->get_header_value("Content-Type"), HasSubstr("version=0.0.4"));
  const CommandResult check = PromtoolCheck(promtool, metrics->body, dir, name);
  EXPECT_EQ(check.exit_code, 0) << name << ": " << check.output;
  EXPECT_EQ(check.output, "") << name << ": promtool reported problems";
  std::printf("promtool check metrics (%s, %zu bytes): exit %d, output '%s'\n", name.c_str(),
              metrics->body.size(), check.exit_code, check.output.c_str());
}

// True once every target was scraped at least `count` times.
bool WaitForScrapes(const PrometheusServer& server, int count) {
  for (int i = 0; i < 60; ++i) {
    const std::optional<double> scrapes = server.Scalar("min(count_over_time(up[1m]))");
    if (scrapes.has_value() && *scrapes >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return false;
}

// The scraped series against what the clients saw (every request done before the first scrape).
void ExpectPromQlAgrees(const PrometheusServer& server, const Sent& sent) {
  const double n = sent.num_requests;
  EXPECT_EQ(server.Scalar("sum(tessera_requests_total)"), n);
  EXPECT_EQ(server.Scalar("sum(tessera_requests_total{status=\"length\"})"), n);
  EXPECT_EQ(server.Scalar("sum(tessera_generation_tokens_total)"),
            static_cast<double>(sent.completion_tokens));
  EXPECT_EQ(server.Scalar("sum(tessera_prompt_tokens_total)"),
            static_cast<double>(sent.prompt_tokens));
  EXPECT_EQ(server.Scalar("sum(tessera_time_to_first_token_seconds_count)"), n);
  EXPECT_EQ(server.Scalar("sum(tessera_e2e_request_latency_seconds_count)"), n);
  EXPECT_EQ(server.Scalar("sum(tessera_request_queue_time_seconds_count)"), n);
  EXPECT_EQ(server.Scalar("sum(tessera_inter_token_latency_seconds_count)"),
            static_cast<double>(sent.completion_tokens) - n);
  EXPECT_GE(server.Scalar("sum(tessera_prefix_cache_queries_total)").value_or(-1),
            static_cast<double>(sent.prompt_tokens));
  EXPECT_EQ(server.Scalar("min(tessera_prefix_cache_enabled)"), 1.0) << "a llama worker shares";
  EXPECT_EQ(server.Scalar("sum(tessera_requests_running)"), 0.0);
  EXPECT_EQ(server.Scalar("sum(tessera_kv_blocks_used)"), 0.0);
  EXPECT_GT(server.Scalar("min(tessera_kv_blocks_capacity)").value_or(0), 0);
  EXPECT_GT(server.Scalar("sum(tessera_step_tokens_count)").value_or(0), 0);
  EXPECT_GT(server.Scalar("sum(tessera_batch_size_count)").value_or(0), 0);
  EXPECT_GT(server.Scalar("sum(tessera_step_seconds_count)").value_or(0), 0);
  EXPECT_GT(server.Scalar("min(tessera_kv_pool_bytes)").value_or(0), 0);
  // cpu: no graphs; cuda (lazy capture): decode steps replay or capture, never miss.
  EXPECT_EQ(server.Scalar("sum(tessera_graph_misses_total)"), 0.0);
  std::printf("prefix cache hits: %.0f tokens\n",
              server.Scalar("sum(tessera_prefix_cache_hits_total)").value_or(-1));
}

// Both metrics servers healthy; requests; promtool on both expositions; the real Prometheus
// scraping both, its PromQL agreeing with what the client saw.
void ExpectPrometheusAgrees(v1::Tessera::Stub& stub, const std::string& router_metrics,
                            const std::string& worker_metrics) {
  const std::optional<std::string> prometheus = FindInPath("prometheus");
  ASSERT_TRUE(prometheus.has_value()) << "prometheus" << kInstallHint;
  const std::optional<std::string> promtool = FindInPath("promtool");
  ASSERT_TRUE(promtool.has_value()) << "promtool (package prometheus)" << kInstallHint;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  ExpectHealthy(worker_metrics);
  ExpectHealthy(router_metrics);

  const Sent sent = SendRequests(stub);
  ExpectPromtoolAccepts(*promtool, router_metrics, dir.path(), "router");
  ExpectPromtoolAccepts(*promtool, worker_metrics, dir.path(), "worker");

  PrometheusServer server;
  ASSERT_TRUE(server.Start(*prometheus, dir.path(), router_metrics, worker_metrics).ok());
  ASSERT_TRUE(WaitForScrapes(server, 2)) << "Prometheus did not scrape both targets twice";
  EXPECT_EQ(server.Scalar("up{job=\"tessera-router\"}"), 1.0);
  EXPECT_EQ(server.Scalar("up{job=\"tessera-worker\"}"), 1.0);
  ExpectPromQlAgrees(server, sent);
}

TEST(MetricsTest, PrometheusScrapesBothProcesses) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.StartWorker({"--threads", "2", "--metrics-port", "0"}).ok());
  ASSERT_TRUE(serving.StartRouter({"--metrics-port", "0"}).ok());
  ASSERT_FALSE(serving.worker_metrics_address().empty()) << "no 'tessera-worker metrics on' line";
  ASSERT_FALSE(serving.router_metrics_address().empty()) << "no 'tessera-router metrics on' line";
  ASSERT_TRUE(serving.WaitConnected().ok());
  ExpectPrometheusAgrees(*serving.NewStub(), serving.router_metrics_address(),
                         serving.worker_metrics_address());
}

// The cuda backend's step metrics through the real Prometheus: a worker on the emulated device
// (the cuda runner, kernels through the SIMT emulator) serving a tiny model with head_dim 64.
TEST(MetricsTest, PrometheusScrapesAnEmulatedCudaWorker) {
  const std::string model = testing_util::UniqueTempPath("metrics_cuda_tiny.gguf");
  ASSERT_TRUE(convert::WriteTinyLlamaGguf({.num_layers = 2, .hidden = 128, .num_heads = 2,
                                           .num_kv_heads = 1, .ffn = 256,
                                           .context_length = 256},
                                          model).ok());
  ServingProcesses serving;
  serving.set_model(model);
  ASSERT_TRUE(serving.StartWorker({"--device", "emulated", "--emulated-memory-mb", "512",
                                   "--max-num-seqs", "8", "--metrics-port", "0"}).ok());
  ASSERT_TRUE(serving.StartRouter({"--metrics-port", "0"}).ok());
  ASSERT_TRUE(serving.WaitConnected().ok());
  const std::optional<std::string> prometheus = FindInPath("prometheus");
  ASSERT_TRUE(prometheus.has_value()) << "prometheus" << kInstallHint;
  TempDir dir;
  const Sent sent = SendRequests(*serving.NewStub());
  PrometheusServer server;
  ASSERT_TRUE(server.Start(*prometheus, dir.path(), serving.router_metrics_address(),
                           serving.worker_metrics_address()).ok());
  ASSERT_TRUE(WaitForScrapes(server, 2));
  ExpectPromQlAgrees(server, sent);
  // Decode steps replayed graphs captured on first use; the step timings are exported.
  EXPECT_GT(server.Scalar("tessera_graph_replays_total").value_or(0), 0);
  EXPECT_GT(server.Scalar("tessera_graph_captures_total").value_or(0), 0);
  EXPECT_GT(server.Scalar("tessera_hostproc_seconds_count").value_or(0), 0);
  EXPECT_TRUE(server.Scalar("tessera_gpu_busy_ratio").has_value());
}

// The same through the supervisor a person runs, as one scrape target: `tessera serve
// --workers 2 --metrics-port 0` and Prometheus scraping only the router, whose /metrics carries
// both workers' series labelled worker="0"/"1" (promtool-clean), and the same PromQL agreeing.
TEST(MetricsTest, TesseraServeIsOneScrapeTarget) {
  const std::optional<std::string> prometheus = FindInPath("prometheus");
  ASSERT_TRUE(prometheus.has_value()) << "prometheus" << kInstallHint;
  const std::optional<std::string> promtool = FindInPath("promtool");
  ASSERT_TRUE(promtool.has_value()) << "promtool (package prometheus)" << kInstallHint;
  ServeProcess serve;
  const absl::Status started = serve.Start(
      {"--workers", "2", "--threads", "1", "--kv-cache-mb", "128", "--metrics-port", "0"});
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_FALSE(serve.router_metrics_address().empty()) << "no 'router metrics on' line";
  EXPECT_TRUE(serve.worker_metrics_address().empty()) << "worker ports printed unasked";
  auto stub = v1::Tessera::NewStub(
      grpc::CreateChannel(serve.address(), grpc::InsecureChannelCredentials()));
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  ExpectHealthy(serve.router_metrics_address());
  const Sent sent = SendRequests(*stub);
  PrometheusServer server;
  ASSERT_TRUE(server.Start(*prometheus, dir.path(), serve.router_metrics_address(), "").ok());
  ASSERT_TRUE(WaitForScrapes(server, 2)) << "Prometheus did not scrape the router twice";
  ExpectPromQlAgrees(server, sent);
  EXPECT_EQ(server.Scalar("count(count by (worker) (tessera_step_seconds_count))"), 2.0);
  EXPECT_EQ(server.Scalar("sum(tessera_worker_metrics_up)"), 2.0);
  EXPECT_EQ(server.Scalar("count(tessera_kv_pool_bytes{worker=~\"0|1\"})"), 2.0);
  ExpectPromtoolAccepts(*promtool, serve.router_metrics_address(), dir.path(), "router");
  EXPECT_EQ(serve.Stop(), 0);
}

TEST(MetricsTest, RouterReadinessFollowsTheWorker) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.StartWorker({"--threads", "1"}).ok());
  ASSERT_TRUE(serving.StartRouter({"--metrics-port", "0"}).ok());
  ASSERT_TRUE(serving.WaitConnected().ok());
  const Address router = Split(serving.router_metrics_address());
  httplib::Result ready = HttpGet(router, "/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);

  serving.KillWorker();
  int status = 0;
  std::string body;
  for (int i = 0; i < 100 && status != 503; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    httplib::Result r = HttpGet(router, "/readyz");
    if (r) std::tie(status, body) = std::make_pair(r->status, r->body);
  }
  EXPECT_EQ(status, 503);
  EXPECT_EQ(body, "no worker is connected\n");
  // ServerStats and /metrics agree that no KV pool exists without a worker (issue 15, item 7).
  const v1::ServerStatsResponse stats = serving.Stats();
  EXPECT_FALSE(stats.worker_connected());
  EXPECT_EQ(stats.kv_blocks_total(), 0);
  httplib::Result scraped = HttpGet(router, "/metrics");
  ASSERT_TRUE(scraped);
  EXPECT_THAT(scraped->body, HasSubstr("\ntessera_kv_blocks_capacity 0\n"));
  httplib::Result health = HttpGet(router, "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << "alive without a worker";
}

}  // namespace
}  // namespace tessera::e2e
