// `tessera serve` + `tessera generate --addr` + `tessera bench` as a person runs them: real
// processes (the supervisor starts tessera-worker and tessera-router itself), the default model.
// Also: serve's pass-through flags reach the children, and a flag a child rejects fails the start.
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "common/process/child_process.h"
#include "nlohmann/json.hpp"
#include "tests/testing/bin_dir.h"
#include "tests/unique_temp_path.h"
#include "tests/e2e/tessera_cli_process.h"

namespace tessera::e2e {
namespace {

using ::testing::HasSubstr;

std::pair<std::string, int> RunToEnd(std::vector<std::string> args) {
  return RunTesseraToEnd(std::move(args), absl::Seconds(120));
}

TEST(ServeCliTest, ServeGenerateBenchAndGracefulStop) {
  std::unique_ptr<process::ChildProcess> serve =
      SpawnTessera({"serve", "--port", "0", "--http-port", "0", "--kv-cache-mb", "256",
                    "--threads", "2"});
  ASSERT_NE(serve, nullptr);
  std::string address;
  const std::regex ready("tessera serve: listening on (\\S+)");
  while (address.empty()) {
    absl::StatusOr<std::string> line = serve->ReadStdoutLine(absl::Seconds(180));
    ASSERT_TRUE(line.ok()) << line.status() << "; stderr: " << serve->StderrTail();
    std::smatch match;
    if (std::regex_search(*line, match, ready)) address = match[1].str();
  }

  auto [answer, generate_exit] =
      RunToEnd({"generate", "--addr", address, "--chat", "What is the capital of France?"});
  EXPECT_EQ(generate_exit, 0);
  EXPECT_THAT(answer, HasSubstr("Paris"));

  // The answer ends its line, and logprobs show each token's text beside its id.
  const std::string out_path = testing_util::UniqueTempPath("generate_out.txt");
  const std::string err_path = testing_util::UniqueTempPath("generate_err.txt");
  ASSERT_EQ(std::system(absl::StrCat(testing_util::TesseraBinDir(), "/tessera generate --addr ",
                                     address, " --prompt 'The capital of France is' ",
                                     "--max-tokens 3 --logprobs 2 >", out_path, " 2>", err_path)
                            .c_str()),
            0);
  std::stringstream out, err;
  out << std::ifstream(out_path).rdbuf();
  err << std::ifstream(err_path).rdbuf();
  ASSERT_FALSE(out.str().empty());
  EXPECT_EQ(out.str().back(), '\n') << out.str();
  EXPECT_THAT(err.str(), ::testing::ContainsRegex(
                             "logprob 0: token [0-9]+ '[^']*' -?[0-9.]+  top: [0-9]+ '[^']*' "))
      << err.str();

  const std::string json_path =
      testing_util::UniqueTempPath("serve_cli_bench.json");
  auto [table, bench_exit] =
      RunToEnd({"bench", "--addr", address, "--concurrency", "1,2", "--num-requests", "4",
                "--prompt-tokens", "16", "--output-tokens", "4", "--json", json_path});
  EXPECT_EQ(bench_exit, 0) << table;
  std::ifstream in(json_path);
  ASSERT_TRUE(in.good()) << json_path;
  const nlohmann::json report = nlohmann::json::parse(in);
  EXPECT_NE(report.dump().find("\"concurrency\""), std::string::npos) << report.dump();

  ASSERT_TRUE(serve->Signal(SIGTERM).ok());
  std::optional<process::ChildExit> exit = serve->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.has_value()) << "tessera serve did not stop after SIGTERM";
  EXPECT_EQ(exit->exit_code, 0) << exit->ToString();
}

// Reads serve's stdout until "tessera serve: listening on"; the "router metrics on" address too.
struct ServeAddresses {
  std::string grpc;
  std::string router_metrics;
};
ServeAddresses AwaitServe(process::ChildProcess& serve) {
  ServeAddresses addresses;
  const std::regex line_format("tessera serve: (router metrics|listening) on (\\S+)");
  while (addresses.grpc.empty()) {
    absl::StatusOr<std::string> line = serve.ReadStdoutLine(absl::Seconds(180));
    if (!line.ok()) {
      ADD_FAILURE() << line.status() << "; stderr: " << serve.StderrTail();
      break;
    }
    std::smatch match;
    if (!std::regex_search(*line, match, line_format)) continue;
    (match[1].str() == "listening" ? addresses.grpc : addresses.router_metrics) = match[2].str();
  }
  return addresses;
}

TEST(ServeCliTest, PassesRouterAndWorkerFlagsOn) {
  const std::string trace_path = testing_util::UniqueTempPath("serve_cli_trace.jsonl");
  std::unique_ptr<process::ChildProcess> serve = SpawnTessera(
      {"serve", "--port", "0", "--http-port", "0", "--kv-cache-mb", "64", "--threads", "1",
       "--block-size", "32", "--max-waiting", "8", "--no-prefix-cache", "--trace-steps",
       trace_path, "--metrics-port", "0", "--router-arg=--drain-timeout-s", "--router-arg=5",
       // Each reaches its child (a flag the child does not know would fail the start).
       "--device", "cpu", "--kv-reserve-horizon", "32", "--max-queue-time", "30",
       "--stream-stall-timeout", "20", "--preemption-storm-threshold", "50",
       "--preemption-storm-window-s", "5", "--log-level", "warn"});
  ASSERT_NE(serve, nullptr);
  const ServeAddresses addresses = AwaitServe(*serve);
  ASSERT_FALSE(addresses.grpc.empty());
  ASSERT_FALSE(addresses.router_metrics.empty()) << "no 'tessera serve: router metrics on' line";

  auto [answer, generate_exit] =
      RunToEnd({"generate", "--addr", addresses.grpc, "--prompt", "One two three", "--max-tokens",
                "3", "--ignore-eos"});
  EXPECT_EQ(generate_exit, 0) << answer;
  const size_t colon = addresses.router_metrics.rfind(':');
  httplib::Client client(addresses.router_metrics.substr(0, colon),
                         std::stoi(addresses.router_metrics.substr(colon + 1)));
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("tessera_prefix_cache_enabled 0")) << "--no-prefix-cache";

  ASSERT_TRUE(serve->Signal(SIGTERM).ok());
  std::optional<process::ChildExit> exit = serve->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0) << exit->ToString();
  std::ifstream trace(trace_path);
  std::string first_step;
  ASSERT_TRUE(std::getline(trace, first_step)) << "--trace-steps wrote nothing to " << trace_path;
  EXPECT_TRUE(nlohmann::json::parse(first_step, nullptr, false).is_object()) << first_step;
}

// A flag that tessera-worker or tessera-router rejects fails `tessera serve` at start, naming the
// child and its complaint; so does a bad port of serve's own.
TEST(ServeCliTest, AFlagAChildRejectsFailsTheStart) {
  for (const std::string child : {"worker", "router"}) {
    std::unique_ptr<process::ChildProcess> serve = SpawnTessera(
        {"serve", "--port", "0", "--http-port", "0", "--kv-cache-mb", "64", "--threads", "1",
         absl::StrCat("--", child, "-arg=--no-such-flag")});
    ASSERT_NE(serve, nullptr);
    std::optional<process::ChildExit> exit = serve->Wait(absl::Seconds(120));
    ASSERT_TRUE(exit.has_value()) << child << ": serve kept running";
    EXPECT_EQ(exit->exit_code, 1) << exit->ToString();
    EXPECT_THAT(serve->StderrTail(), HasSubstr(absl::StrCat("tessera: error: tessera-", child,
                                                            " exited before listening")));
    EXPECT_THAT(serve->StderrTail(), HasSubstr("--no-such-flag"));
  }
  auto [out, exit_code] = RunToEnd({"serve", "--metrics-port", "70000"});
  EXPECT_EQ(exit_code, 1);
}

}  // namespace
}  // namespace tessera::e2e
