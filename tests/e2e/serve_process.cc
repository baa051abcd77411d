#include "tests/e2e/serve_process.h"

#include <csignal>
#include <optional>
#include <regex>

#include "absl/strings/str_cat.h"
#include "tests/testing/bin_dir.h"

namespace tessera::e2e {

ServeProcess::~ServeProcess() {
  if (child_ != nullptr) Stop(10);
}

absl::Status ServeProcess::Start(const std::vector<std::string>& args, double timeout_s) {
  // No HTTP API unless asked (--http-port -1 in `args`): tests run in parallel, 8080 is shared.
  std::vector<std::string> argv = {"serve", "--port", "0", "--http-port", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<std::unique_ptr<process::ChildProcess>> spawned = process::ChildProcess::Spawn(
      {.path = absl::StrCat(testing_util::TesseraBinDir(), "/tessera"), .args = argv,
       .echo_stderr_fd = 2});
  if (!spawned.ok()) return spawned.status();
  child_ = std::move(*spawned);
  const std::regex line_format(
      "tessera serve: (router metrics|worker metrics|http|listening) on "
      "(\\S+)");
  for (;;) {
    absl::StatusOr<std::string> line = child_->ReadStdoutLine(absl::Seconds(timeout_s));
    if (!line.ok()) {
      return absl::Status(line.status().code(),
                          absl::StrCat("tessera serve never became ready: ",
                                       line.status().message(), "; stderr: ", StderrTail()));
    }
    std::smatch match;
    if (!std::regex_search(*line, match, line_format)) continue;
    const std::string what = match[1].str();
    const std::string address = match[2].str();
    if (what == "router metrics") router_metrics_address_ = address;
    if (what == "worker metrics") {
      if (worker_metrics_addresses_.front().empty()) worker_metrics_addresses_.clear();
      worker_metrics_addresses_.push_back(address);
    }
    if (what == "http") http_address_ = address;
    if (what == "listening") {
      address_ = address;
      return absl::OkStatus();
    }
  }
}

int ServeProcess::Stop(double timeout_s) {
  if (child_ == nullptr) return -1;
  (void)child_->Signal(SIGTERM);
  std::optional<process::ChildExit> exit = child_->Wait(absl::Seconds(timeout_s));
  child_.reset();  // SIGKILLs the group if it is still running
  return exit.has_value() ? exit->exit_code : -1;
}

std::string ServeProcess::StderrTail() const {
  return child_ != nullptr ? child_->StderrTail() : "";
}

int ServeProcess::pid() const { return child_ == nullptr ? -1 : child_->pid(); }

}  // namespace tessera::e2e
