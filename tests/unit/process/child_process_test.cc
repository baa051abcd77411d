// ChildProcess (common/process: `tessera serve`, tessera-localai) driven with small /bin/sh scripts.
#include "common/process/child_process.h"

#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessera::process {
namespace {

using ::testing::HasSubstr;

ChildOptions ShellOptions(const std::string& script) {
  ChildOptions options;
  options.path = "/bin/sh";
  options.args = {"-c", script};
  options.name = "sh";
  return options;
}

std::unique_ptr<ChildProcess> Shell(const std::string& script) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(ShellOptions(script));
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? *std::move(child) : nullptr;
}

TEST(ChildProcessTest, ReadsLinesThenSeesTheExitStatus) {
  std::unique_ptr<ChildProcess> child = Shell("echo hello; printf 'world\\nlast'; exit 3");
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(*child->ReadStdoutLine(absl::Seconds(10)), "hello");
  EXPECT_EQ(*child->ReadStdoutLine(absl::Seconds(10)), "world");
  EXPECT_EQ(*child->ReadStdoutLine(absl::Seconds(10)), "last");  // no trailing newline
  EXPECT_EQ(child->ReadStdoutLine(absl::Seconds(10)).status().code(),
            absl::StatusCode::kOutOfRange);
  std::optional<ChildExit> exit = child->Wait(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 3);
  EXPECT_EQ(exit->signal, 0);
  EXPECT_FALSE(exit->success());
  EXPECT_EQ(exit->ToString(), "exit status 3");
  EXPECT_EQ(child->Poll()->exit_code, 3);  // stays reaped
}

TEST(ChildProcessTest, ReadLineTimesOutThenSignalKills) {
  std::unique_ptr<ChildProcess> child = Shell("exec sleep 30");
  ASSERT_NE(child, nullptr);
  const absl::Time start = absl::Now();
  EXPECT_EQ(child->ReadStdoutLine(absl::Milliseconds(200)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(190));
  EXPECT_FALSE(child->Poll().has_value());
  ASSERT_TRUE(child->Signal(SIGTERM).ok());
  std::optional<ChildExit> exit = child->Wait(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGTERM);
  EXPECT_THAT(exit->ToString(), HasSubstr("killed by signal 15"));
  EXPECT_TRUE(child->Signal(SIGTERM).ok());  // reaped: nothing to signal, no error
}

TEST(ChildProcessTest, ChildHandlesTheSignalAndExitsCleanly) {
  // The child's signal mask and SIGTERM disposition are reset even if the parent blocks it.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  std::unique_ptr<ChildProcess> child = Shell(
      "trap 'echo draining; exit 0' TERM; echo ready; while true; do sleep 0.05; done");
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(*child->ReadStdoutLine(absl::Seconds(10)), "ready");
  ASSERT_TRUE(child->Signal(SIGTERM).ok());
  EXPECT_EQ(*child->ReadStdoutLine(absl::Seconds(10)), "draining");
  std::optional<ChildExit> exit = child->Wait(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->success());
}

TEST(ChildProcessTest, EarlyExitKeepsTheStderrTail) {
  std::unique_ptr<ChildProcess> child =
      Shell("echo 'loading model' >&2; echo 'error: no such file' >&2; exit 7");
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->ReadStdoutLine(absl::Seconds(10)).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(child->StderrTail(), "loading model\nerror: no such file\n");  // complete already
  std::optional<ChildExit> exit = child->Wait(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 7);
  // Once the exit is known, so is everything the child wrote.
  EXPECT_EQ(child->StderrTail(), "loading model\nerror: no such file\n");
}

TEST(ChildProcessTest, StderrTailKeepsOnlyTheLastBytes) {
  std::unique_ptr<ChildProcess> child =
      Shell("i=0; while [ $i -lt 300 ]; do echo \"line $i of the noise\" >&2; i=$((i+1)); done; "
            "echo END >&2");
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(child->Wait(absl::Seconds(10)).has_value());
  const std::string tail = child->StderrTail();
  EXPECT_EQ(tail.size(), ChildProcess::kStderrTailBytes);
  EXPECT_THAT(tail, HasSubstr("line 299 of the noise\nEND\n"));
  EXPECT_THAT(tail, ::testing::Not(HasSubstr("line 0 of")));
}

TEST(ChildProcessTest, MissingExecutableIsNotFound) {
  ChildOptions options;
  options.path = "/nonexistent/tessera-worker";
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(options);
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(child.status().message(), HasSubstr("/nonexistent/tessera-worker"));
}

TEST(ChildProcessTest, DestructorKillsTheRunningChildAndItsGroup) {
  pid_t pid = 0;
  {
    // The shell's own child (sleep) keeps the pipes open: the destructor must not hang on it.
    std::unique_ptr<ChildProcess> child = Shell("sleep 30 & echo started; wait");
    ASSERT_NE(child, nullptr);
    EXPECT_EQ(*child->ReadStdoutLine(absl::Seconds(10)), "started");
    pid = child->pid();
    const absl::Time start = absl::Now();
    child.reset();
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }
  EXPECT_EQ(kill(pid, 0), -1);  // reaped: no such process
}

TEST(ChildProcessTest, EchoesLinesWithTheNamePrefix) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ChildOptions options = ShellOptions("echo out; echo err >&2");
  options.name = "fake-worker";
  options.echo_stdout_fd = fds[1];
  options.echo_stderr_fd = fds[1];
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(options);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->Wait(absl::Seconds(10)).has_value());
  child->reset();  // joins the pumps: everything is echoed
  close(fds[1]);
  std::string echoed;
  char buffer[256];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) echoed.append(buffer, n);
  close(fds[0]);
  EXPECT_THAT(echoed, HasSubstr("[fake-worker] out\n"));
  EXPECT_THAT(echoed, HasSubstr("[fake-worker] err\n"));
}

}  // namespace
}  // namespace tessera::process
