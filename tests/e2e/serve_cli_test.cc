// `tessera serve` + `tessera generate --addr` + `tessera bench` as a person runs them: real
// processes (the supervisor starts tessera-worker and tessera-router itself), the default model.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/unique_temp_path.h"
#include "tools/cli/child_process.h"

namespace tessera::e2e {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<cli::ChildProcess> SpawnTessera(std::vector<std::string> args) {
  absl::StatusOr<std::unique_ptr<cli::ChildProcess>> child = cli::ChildProcess::Spawn(
      {.path = absl::StrCat(TESSERA_BIN_DIR, "/tessera"), .args = std::move(args),
       .echo_stderr_fd = 2});
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? std::move(*child) : nullptr;
}

// All of a short-lived child's stdout, and its exit code.
std::pair<std::string, int> RunToEnd(std::vector<std::string> args) {
  std::unique_ptr<cli::ChildProcess> child = SpawnTessera(std::move(args));
  if (child == nullptr) return {"", -1};
  std::string out;
  for (;;) {
    absl::StatusOr<std::string> line = child->ReadStdoutLine(absl::Seconds(120));
    if (!line.ok()) break;
    absl::StrAppend(&out, *line, "\n");
  }
  std::optional<cli::ChildExit> exit = child->Wait(absl::Seconds(30));
  return {out, exit.has_value() ? exit->exit_code : -1};
}

TEST(ServeCliTest, ServeGenerateBenchAndGracefulStop) {
  std::unique_ptr<cli::ChildProcess> serve =
      SpawnTessera({"serve", "--port", "0", "--kv-cache-mb", "256", "--threads", "2"});
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
  std::optional<cli::ChildExit> exit = serve->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.has_value()) << "tessera serve did not stop after SIGTERM";
  EXPECT_EQ(exit->exit_code, 0) << exit->ToString();
}

}  // namespace
}  // namespace tessera::e2e
