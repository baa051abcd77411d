#include "common/process/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::process {
namespace {

// Pumps wake up this often to notice stop_ (after the child is gone).
constexpr int kPumpPollMs = 100;
// Unread stdout lines kept; older ones are dropped (a long-lived child whose lines nobody reads
// after start-up must not grow the queue forever).
constexpr size_t kMaxQueuedLines = 1024;

absl::Status ErrnoStatus(int err, std::string_view what) {
  const std::string message = absl::StrCat(std::string(what), ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

void CloseIfOpen(int fd) {
  if (fd >= 0) close(fd);
}

// Everything the child needs after fork, prepared before it: between fork and exec only
// async-signal-safe calls are allowed (the parent may have other threads, e.g. gRPC's).
struct ExecPlan {
  std::vector<char*> argv;  // null-terminated
  std::vector<char*> envp;  // null-terminated
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int error_fd = -1;  // close-on-exec; receives errno when execv fails
  pid_t parent = 0;
  bool new_process_group = true;
  sigset_t empty_mask;
  struct sigaction default_action;
};

[[noreturn]] void ExecChild(const ExecPlan& plan) {
  if (plan.new_process_group) setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != plan.parent) _exit(127);  // the parent died before prctl took effect
  dup2(plan.stdin_fd, STDIN_FILENO);
  dup2(plan.stdout_fd, STDOUT_FILENO);
  dup2(plan.stderr_fd, STDERR_FILENO);
  for (int signo : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) {
    sigaction(signo, &plan.default_action, nullptr);
  }
  sigprocmask(SIG_SETMASK, &plan.empty_mask, nullptr);  // the supervisor blocks some signals
  execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  const int err = errno;
  ssize_t ignored = write(plan.error_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

// Splits complete lines off the front of `buffer`.
std::vector<std::string> TakeLines(std::string& buffer) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t newline; (newline = buffer.find('\n', start)) != std::string::npos;
       start = newline + 1) {
    lines.push_back(buffer.substr(start, newline - start));
  }
  buffer.erase(0, start);
  return lines;
}

// Reads `fd` until EOF (or until the owner set stop_ and the pipe went quiet), handing each
// chunk to `consume`; closes `fd`.
template <typename Consume>
void PumpPipe(int fd, const std::atomic<bool>& stop, Consume consume) {
  char buffer[4096];
  for (;;) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int ready = poll(&p, 1, kPumpPollMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (stop.load()) break;
      continue;
    }
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    consume(std::string_view(buffer, static_cast<size_t>(n)));
  }
  close(fd);
}

}  // namespace

std::string ChildExit::ToString() const {
  if (signal != 0) return absl::StrCat("killed by signal ", signal, " (", strsignal(signal), ")");
  return absl::StrCat("exit status ", exit_code);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(ChildOptions options) {
  if (options.name.empty()) options.name = options.path.substr(options.path.rfind('/') + 1);
  if (access(options.path.c_str(), X_OK) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot run ", options.path));
  }
  std::vector<std::string> argv_storage = {options.path};
  argv_storage.insert(argv_storage.end(), options.args.begin(), options.args.end());
  ExecPlan plan;
  for (std::string& arg : argv_storage) plan.argv.push_back(arg.data());
  plan.argv.push_back(nullptr);
  // The inherited environment, minus the names options.env sets, plus options.env.
  std::vector<std::string> env_storage;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view inherited(*entry);
    const bool replaced = std::any_of(options.env.begin(), options.env.end(), [&](const auto& e) {
      const size_t eq = e.find('=');
      return inherited.substr(0, inherited.find('=') + 1) == std::string_view(e).substr(0, eq + 1);
    });
    if (!replaced) env_storage.emplace_back(inherited);
  }
  env_storage.insert(env_storage.end(), options.env.begin(), options.env.end());
  for (std::string& entry : env_storage) plan.envp.push_back(entry.data());
  plan.envp.push_back(nullptr);
  plan.parent = getpid();
  plan.new_process_group = options.new_process_group;
  sigemptyset(&plan.empty_mask);
  std::memset(&plan.default_action, 0, sizeof(plan.default_action));
  plan.default_action.sa_handler = SIG_DFL;

  int out[2] = {-1, -1}, err[2] = {-1, -1}, exec_error[2] = {-1, -1};
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      pipe2(exec_error, O_CLOEXEC) != 0) {
    const int saved = errno;
    for (int fd : {devnull, out[0], out[1], err[0], err[1], exec_error[0], exec_error[1]}) {
      CloseIfOpen(fd);
    }
    return ErrnoStatus(saved, "cannot create pipes for a child process");
  }
  plan.stdin_fd = devnull;
  plan.stdout_fd = out[1];
  plan.stderr_fd = err[1];
  plan.error_fd = exec_error[1];

  const pid_t pid = fork();
  if (pid == 0) ExecChild(plan);
  const int fork_errno = errno;
  for (int fd : {devnull, out[1], err[1], exec_error[1]}) close(fd);
  int exec_errno = 0;
  ssize_t n;
  if (pid > 0) {
    // EOF (0 bytes) means execv succeeded: the close-on-exec write end vanished with it.
    do {
      n = read(exec_error[0], &exec_errno, sizeof(exec_errno));
    } while (n < 0 && errno == EINTR);
    if (n != sizeof(exec_errno)) exec_errno = 0;
  }
  close(exec_error[0]);
  if (pid < 0 || exec_errno != 0) {
    if (pid > 0) waitpid(pid, nullptr, 0);
    close(out[0]);
    close(err[0]);
    return ErrnoStatus(pid < 0 ? fork_errno : exec_errno, absl::StrCat("cannot run ", options.path));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(std::move(options), pid, out[0], err[0]));
}

ChildProcess::ChildProcess(ChildOptions options, pid_t pid, int stdout_fd, int stderr_fd)
    : options_(std::move(options)), pid_(pid) {
  stdout_pump_ = std::thread([this, stdout_fd] { PumpStdout(stdout_fd); });
  stderr_pump_ = std::thread([this, stderr_fd] { PumpStderr(stderr_fd); });
}

ChildProcess::~ChildProcess() {
  if (!Poll().has_value()) {
    // Still running: the whole group (a shell's own children too) when it has one.
    kill(options_.new_process_group ? -pid_ : pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  stop_ = true;  // a grandchild may still hold the pipes open; stop once they go quiet
  stdout_pump_.join();
  stderr_pump_.join();
}

absl::StatusOr<std::string> ChildProcess::ReadStdoutLine(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool ready = line_ready_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] {
    return !lines_.empty() || stdout_closed_;
  });
  if (!lines_.empty()) {
    std::string line = std::move(lines_.front());
    lines_.pop_front();
    return line;
  }
  if (ready) {
    // Usually the child exited: let its last stderr arrive, so StderrTail can explain why.
    line_ready_.wait_for(lock, std::chrono::seconds(1), [this] { return stderr_closed_; });
    return absl::OutOfRangeError(absl::StrCat(options_.name, " closed its stdout"));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no line from ", options_.name, " within ", absl::FormatDuration(timeout)));
}

absl::Status ChildProcess::Signal(int signo) {
  if (exit_.has_value()) return absl::OkStatus();
  if (kill(pid_, signo) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot signal ", options_.name));
  }
  return absl::OkStatus();
}

std::optional<ChildExit> ChildProcess::Poll() {
  if (exit_.has_value()) return exit_;
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(pid_, &status, WNOHANG);
  } while (reaped < 0 && errno == EINTR);
  if (reaped == 0) return std::nullopt;
  ChildExit result;
  if (reaped > 0 && WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  } else if (reaped > 0 && WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }  // reaped < 0 (ECHILD: someone else reaped it): exit_code stays -1
  exit_ = result;
  // Let the pumps take what the child wrote last, so StderrTail explains its exit.
  std::unique_lock<std::mutex> lock(mu_);
  line_ready_.wait_for(lock, std::chrono::seconds(1),
                       [this] { return stdout_closed_ && stderr_closed_; });
  return exit_;
}

std::optional<ChildExit> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (std::optional<ChildExit> result = Poll()) return result;
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

std::string ChildProcess::StderrTail() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stderr_tail_;
}

void ChildProcess::Echo(int fd, std::string_view line) const {
  if (fd < 0) return;
  const std::string text = absl::StrCat("[", options_.name, "] ", std::string(line), "\n");
  ssize_t ignored = write(fd, text.data(), text.size());  // one write: lines stay whole
  (void)ignored;
}

void ChildProcess::PumpStdout(int fd) {
  std::string partial;
  auto publish = [this](std::vector<std::string> lines) {
    for (const std::string& line : lines) Echo(options_.echo_stdout_fd, line);
    std::lock_guard<std::mutex> lock(mu_);
    for (std::string& line : lines) lines_.push_back(std::move(line));
    while (lines_.size() > kMaxQueuedLines) lines_.pop_front();
    line_ready_.notify_all();
  };
  PumpPipe(fd, stop_, [&](std::string_view chunk) {
    partial.append(chunk);
    publish(TakeLines(partial));
  });
  if (!partial.empty()) publish({partial});
  std::lock_guard<std::mutex> lock(mu_);
  stdout_closed_ = true;
  line_ready_.notify_all();
}

void ChildProcess::PumpStderr(int fd) {
  std::string partial;
  PumpPipe(fd, stop_, [&](std::string_view chunk) {
    partial.append(chunk);
    for (const std::string& line : TakeLines(partial)) Echo(options_.echo_stderr_fd, line);
    std::lock_guard<std::mutex> lock(mu_);
    stderr_tail_.append(chunk);
    if (stderr_tail_.size() > kStderrTailBytes) {
      stderr_tail_.erase(0, stderr_tail_.size() - kStderrTailBytes);
    }
  });
  if (!partial.empty()) Echo(options_.echo_stderr_fd, partial);
  std::lock_guard<std::mutex> lock(mu_);
  stderr_closed_ = true;
  line_ready_.notify_all();
}

pid_t LiveChildPid(pid_t parent, const std::string& name) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string comm = line.substr(open + 1, close - open - 1);
    char state = 0;
    int ppid = -1;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) continue;
    // A zombie is a dead child not reaped yet: not "the live child".
    if (ppid == parent && state != 'Z' && name.rfind(comm, 0) == 0) return std::stoi(pid);
  }
  return -1;
}

}  // namespace tessera::process
