#include "tools/cli/serve_children.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace tessera::cli {
namespace {

// The last non-empty line of a child's stderr, for one-line error messages (the whole output
// was echoed already).
std::string LastStderrLine(const process::ChildProcess& child) {
  std::vector<std::string> lines = absl::StrSplit(child.StderrTail(), '\n', absl::SkipWhitespace());
  return lines.empty() ? "" : absl::StrCat("; its last stderr line: \"", lines.back(), "\"");
}

// Whether `line` is "<binary> metrics on ADDR" or "<binary> http on ADDR"; stores ADDR.
bool TakeAnnouncement(const std::string& line, const std::string& binary,
                      ChildAddresses* addresses) {
  for (auto [what, address] : {std::pair{" metrics on ", &addresses->metrics},
                               std::pair{" http on ", &addresses->http}}) {
    const std::string announce = absl::StrCat(binary, what);
    if (absl::StartsWith(line, announce)) {
      *address = std::string(absl::StripAsciiWhitespace(line.substr(announce.size())));
      return true;
    }
  }
  return false;
}

}  // namespace

sigset_t SupervisedSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int signo : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&signals, signo);
  return signals;
}

int TakeStopSignal(absl::Duration wait) {
  const sigset_t signals = SupervisedSignals();
  const timespec timeout = absl::ToTimespec(wait);
  const int signo = sigtimedwait(&signals, nullptr, &timeout);
  return signo == SIGINT || signo == SIGTERM ? signo : 0;
}

absl::Status Interrupted(int signo) {
  return absl::CancelledError(absl::StrCat("interrupted (", strsignal(signo), ")"));
}

std::string Died(const process::ChildProcess& child, const process::ChildExit& exit,
                 std::string_view when) {
  return absl::StrCat(child.name(), " exited ", std::string(when), " (", exit.ToString(), ")",
                      LastStderrLine(child));
}

absl::StatusOr<std::string> ChildLauncher::FindBinary(const std::string& name) const {
  std::filesystem::path dir = options_.bin_dir;
  if (dir.empty()) {
    std::error_code error;
    dir = std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
    if (error) return absl::InternalError("cannot read /proc/self/exe: " + error.message());
  }
  const std::filesystem::path path = dir / name;
  if (access(path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(name, " not found at ", path.string(),
                                            " (build it next to tessera, or pass --bin-dir)"));
  }
  return path.string();
}

absl::StatusOr<std::unique_ptr<process::ChildProcess>> ChildLauncher::Start(
    const std::string& binary, const std::string& name, std::vector<std::string> args,
    std::vector<std::string> env) const {
  absl::StatusOr<std::string> path = FindBinary(binary);
  if (!path.ok()) return path.status();
  process::ChildOptions child;
  child.path = *path;
  child.args = std::move(args);
  child.name = name;
  child.echo_stdout_fd = STDERR_FILENO;  // our stdout carries only our own "listening" line
  child.echo_stderr_fd = STDERR_FILENO;
  child.env = std::move(env);
  return process::ChildProcess::Spawn(std::move(child));
}

absl::StatusOr<std::string> ChildLauncher::AwaitListening(process::ChildProcess& child,
                                                          const std::string& binary,
                                                          ChildAddresses* addresses,
                                                          int* stop_signal) const {
  const std::string prefix = absl::StrCat(binary, " listening on ");
  const absl::Time deadline = absl::Now() + absl::Seconds(options_.startup_timeout_s);
  for (;;) {
    absl::StatusOr<std::string> line = child.ReadStdoutLine(absl::Milliseconds(100));
    if (line.ok() && TakeAnnouncement(*line, binary, addresses)) continue;
    if (line.ok() && absl::StartsWith(*line, prefix)) {
      const std::string addr(absl::StripAsciiWhitespace(line->substr(prefix.size())));
      if (addr.find(':') == std::string::npos) {
        return absl::InternalError(absl::StrCat(child.name(), " printed a bad address: ", *line));
      }
      return addr;
    }
    if (line.status().code() == absl::StatusCode::kOutOfRange) {
      const std::optional<process::ChildExit> exit = child.Wait(kExitGrace);
      if (!exit.has_value()) {
        return absl::InternalError(absl::StrCat(child.name(), " closed its stdout unannounced"));
      }
      return absl::UnavailableError(Died(child, *exit, "before listening"));
    }
    if (int signo = TakeStopSignal(absl::ZeroDuration())) {
      *stop_signal = signo;
      return Interrupted(signo);
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(child.name(), " did not report \"", prefix,
                                                      "...\" within ", options_.startup_timeout_s,
                                                      " s (--startup-timeout-s)"));
    }
  }
}

process::ChildExit StopChild(process::ChildProcess& child, int signo, absl::Duration grace) {
  (void)child.Signal(signo);
  const absl::Time deadline = absl::Now() + grace;
  while (absl::Now() < deadline) {
    if (std::optional<process::ChildExit> exit = child.Poll()) return *exit;
    if (TakeStopSignal(absl::Milliseconds(50)) != 0) {
      std::fprintf(stderr, "tessera serve: second signal; killing %s\n", child.name().c_str());
      break;
    }
  }
  (void)child.Signal(SIGKILL);
  return child.Wait(kExitGrace).value_or(process::ChildExit{});
}

}  // namespace tessera::cli
