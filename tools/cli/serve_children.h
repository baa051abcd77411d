// What `tessera serve` does with any of its children (serve_command.cc, serve_workers.h): find
// the binary next to tessera, build its arguments, spawn it with its output echoed to stderr, read its stdout until it
// announces where it listens, and stop it with a grace period. Also the supervisor's signals:
// SIGINT/SIGTERM/SIGCHLD are blocked before any thread starts and taken with sigtimedwait.
//
// Threading: the supervisor's main thread only.
#pragma once

#include <signal.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/process/child_process.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

inline constexpr char kWorkerBinary[] = "tessera-worker";
inline constexpr char kRouterBinary[] = "tessera-router";
// How long a worker may take to exit after SIGTERM, and the router beyond its drain timeout.
inline constexpr absl::Duration kExitGrace = absl::Seconds(10);

sigset_t SupervisedSignals();

// A pending SIGINT/SIGTERM within `wait` (0 if none); a SIGCHLD only ends the wait early.
int TakeStopSignal(absl::Duration wait);

// CANCELLED "interrupted (Terminated)".
absl::Status Interrupted(int signo);

// "tessera-worker exited before listening (exit status 1); its last stderr line: "..."".
std::string Died(const process::ChildProcess& child, const process::ChildExit& exit,
                 std::string_view when);

// What a child printed before its listening line ("" when it did not).
struct ChildAddresses {
  std::string metrics;
  std::string http;
};

class ChildLauncher {
 public:
  explicit ChildLauncher(const ServeOptions& options) : options_(options) {}

  // Spawns `binary` (kWorkerBinary or kRouterBinary) named `name` in messages and the echo
  // prefix, with `env` ("NAME=value") added to the environment.
  absl::StatusOr<std::unique_ptr<process::ChildProcess>> Start(
      const std::string& binary, const std::string& name, std::vector<std::string> args,
      std::vector<std::string> env) const;
  // Reads `child`'s stdout until "<binary> listening on HOST:PORT"; returns HOST:PORT. The
  // "<binary> metrics on HOST:PORT" and "<binary> http on HOST:PORT" lines before it land in
  // *addresses. A stop signal meanwhile is stored in *stop_signal (CANCELLED).
  absl::StatusOr<std::string> AwaitListening(process::ChildProcess& child,
                                             const std::string& binary,
                                             ChildAddresses* addresses, int* stop_signal) const;

 private:
  absl::StatusOr<std::string> FindBinary(const std::string& name) const;

  const ServeOptions& options_;
};

// Appends `flag value` when `value` is set (`value > unset`).
template <typename T>
void AddIfSet(std::vector<std::string>& args, const char* flag, T value, T unset) {
  if (value > unset) args.insert(args.end(), {flag, absl::StrCat(value)});
}

inline void AddIfSet(std::vector<std::string>& args, const char* flag,
                     const std::string& value) {
  if (!value.empty()) args.insert(args.end(), {flag, value});
}

// Signals `child`, waits up to `grace` (a further stop signal cuts it short), then SIGKILLs.
process::ChildExit StopChild(process::ChildProcess& child, int signo, absl::Duration grace);

}  // namespace tessera::cli
