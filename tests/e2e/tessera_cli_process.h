// The `tessera` command line as a test runs it: a child process of the built binary, its stderr
// echoed, and a short-lived one read to its end. Shared by the e2e tests that drive the CLI.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/process/child_process.h"
#include "tests/testing/bin_dir.h"

namespace tessera::e2e {

inline std::unique_ptr<process::ChildProcess> SpawnTessera(std::vector<std::string> args) {
  absl::StatusOr<std::unique_ptr<process::ChildProcess>> child = process::ChildProcess::Spawn(
      {.path = absl::StrCat(testing_util::TesseraBinDir(), "/tessera"),
       .args = std::move(args),
       .name = "",
       .echo_stdout_fd = -1,
       .echo_stderr_fd = 2,
       .new_process_group = true,
       .env = {}});
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? std::move(*child) : nullptr;
}

// All of a short-lived child's stdout (each line waited for at most `line_timeout`), and its
// exit code (-1 when it could not start or did not exit within 30 s of closing its stdout).
inline std::pair<std::string, int> RunTesseraToEnd(std::vector<std::string> args,
                                                   absl::Duration line_timeout) {
  std::unique_ptr<process::ChildProcess> child = SpawnTessera(std::move(args));
  if (child == nullptr) return {"", -1};
  std::string out;
  for (;;) {
    absl::StatusOr<std::string> line = child->ReadStdoutLine(line_timeout);
    if (!line.ok()) break;
    absl::StrAppend(&out, *line, "\n");
  }
  std::optional<process::ChildExit> exit = child->Wait(absl::Seconds(30));
  return {out, exit.has_value() ? exit->exit_code : -1};
}

}  // namespace tessera::e2e
