// A child process (for `tessera serve`, tessera-localai and the tests that start them): fork/exec
// with the child's stdout and stderr on pipes, line reads with a timeout, signals, and exit status.
//
// Two pump threads per child drain its pipes for its whole life (a child blocked on a full pipe
// would hang): stdout is split into lines queued for ReadStdoutLine, stderr is kept as a tail for
// error messages; both may be echoed, line by line with a "[name] " prefix, to a file descriptor.
//
// The child gets stdin from /dev/null, an empty signal mask, and (by default) its own process
// group, so a terminal's Ctrl-C reaches only the supervisor, which decides the shutdown order. It
// also gets PR_SET_PDEATHSIG = SIGTERM, so it does not outlive a supervisor that was SIGKILLed;
// Linux ties that to the forking thread, so Spawn from a thread that lives as long as the child
// (the main thread).
//
// Ownership/threading: one owner thread calls every method; the pump threads are internal. The
// destructor SIGKILLs (the process group of) a child that is still running, reaps it, and joins
// the pumps.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::process {

struct ChildExit {
  int exit_code = -1;  // the exit status when the child exited; -1 when a signal killed it
  int signal = 0;      // the signal that killed it; 0 when it exited

  bool success() const { return exit_code == 0; }
  std::string ToString() const;  // "exit status 3" or "killed by signal 15 (Terminated)"
};

struct ChildOptions {
  std::string path;               // the executable (no PATH search)
  std::vector<std::string> args;  // argv[1...]
  std::string name = {};          // for messages and the echo prefix; default: path's basename
  int echo_stdout_fd = -1;        // echo stdout lines ("[name] line") here; -1: don't
  int echo_stderr_fd = -1;        // echo stderr lines here; -1: don't
  bool new_process_group = true;  // see the file comment
  // "NAME=value" entries added to (or replacing in) the inherited environment: secrets go here
  // rather than on the command line, where any local user could read them.
  std::vector<std::string> env = {};
};

class ChildProcess {
 public:
  // Bytes of stderr kept for StderrTail.
  static constexpr size_t kStderrTailBytes = 4096;

  // NOT_FOUND / PERMISSION_DENIED / INTERNAL naming the path when it cannot be executed.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(ChildOptions options);

  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return options_.name; }

  // The next line the child wrote to stdout, without its '\n' (a last line without one counts).
  // Only the newest 1024 unread lines are kept.
  // DEADLINE_EXCEEDED when none arrives within `timeout`; OUT_OF_RANGE once stdout is closed
  // (usually: the child exited) and every line has been read; stderr is then complete too
  // (bounded by a second's wait).
  absl::StatusOr<std::string> ReadStdoutLine(absl::Duration timeout);

  // Sends `signo` to the child (not its group). OK (and nothing sent) once it was reaped.
  absl::Status Signal(int signo);

  // Reaps the child if it has ended; nullopt while it runs. Stays set once reaped. Once it
  // returns an exit, the child's output is complete (the pumps reached EOF), unless a
  // grandchild holds the pipes open for more than a second.
  std::optional<ChildExit> Poll();
  // Polls until the child ends or `timeout` passes (nullopt then).
  std::optional<ChildExit> Wait(absl::Duration timeout);

  // The last kStderrTailBytes the child wrote to stderr (may start mid-line).
  std::string StderrTail() const;

 private:
  ChildProcess(ChildOptions options, pid_t pid, int stdout_fd, int stderr_fd);

  // Pump bodies: read `fd` until EOF, or until stop_ is set and nothing more arrives.
  void PumpStdout(int fd);
  void PumpStderr(int fd);
  void Echo(int fd, std::string_view line) const;

  const ChildOptions options_;
  const pid_t pid_;
  std::optional<ChildExit> exit_;  // set once reaped (owner thread only)

  mutable std::mutex mu_;
  std::condition_variable line_ready_;  // also signalled when a pipe closes
  std::deque<std::string> lines_;  // guarded by mu_
  bool stdout_closed_ = false;     // guarded by mu_
  bool stderr_closed_ = false;     // guarded by mu_
  std::string stderr_tail_;        // guarded by mu_

  std::atomic<bool> stop_{false};  // set after the child is reaped in the destructor
  std::thread stdout_pump_;
  std::thread stderr_pump_;
};

// The pid of a live (not zombie) child of `parent` whose command name starts `name` (from
// /proc; the kernel keeps 15 characters of it), or -1.
pid_t LiveChildPid(pid_t parent, const std::string& name);

}  // namespace tessera::process
