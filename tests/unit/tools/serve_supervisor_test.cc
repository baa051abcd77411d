// `tessera serve`'s failure paths, with fake tessera-worker / tessera-router shell scripts in a
// temp --bin-dir: a child that dies before listening, one that never says it listens, a router
// that never turns SERVING. Each must end the command with one clear error line, exit 1, and
// leave no child behind. (The happy path needs the real binaries: tests/e2e.)
#include <sys/stat.h>
#include <sys/wait.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testing/bin_dir.h"

namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class ServeSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(testing::TempDir()) /
           absl::StrCat("serve_supervisor_", getpid(), "_",
                        testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void WriteScript(const std::string& name, const std::string& body) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
  }

  Result Serve(const std::string& extra_args) {
    const std::string command =
        absl::StrCat(tessera::testing_util::TesseraBinDir(), "/tessera serve --port 0 --bin-dir ",
                     dir_.string(), " ", extra_args, " >", (dir_ / "out").string(), " 2>",
                     (dir_ / "err").string());
    const auto start = std::chrono::steady_clock::now();
    const int status = std::system(command.c_str());
    Result r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(dir_ / "out");
    r.err = ReadFile(dir_ / "err");
    return r;
  }

  // The last line of stderr: main's "tessera: error: ..." line.
  static std::string LastLine(const std::string& text) {
    std::string trimmed = text;
    while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
    return trimmed.substr(trimmed.rfind('\n') + 1);
  }

  std::filesystem::path dir_;
};

TEST_F(ServeSupervisorTest, WorkerThatExitsEarlyIsReportedWithStatusAndStderr) {
  WriteScript("tessera-worker", "echo 'loading model' >&2; echo 'error: no such model' >&2; exit 3");
  WriteScript("tessera-router", "exit 0");
  const Result r = Serve("");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(LastLine(r.err),
            "tessera: error: tessera-worker exited before listening (exit status 3); its last "
            "stderr line: \"error: no such model\"");
  EXPECT_THAT(r.err, HasSubstr("[tessera-worker] loading model\n"));  // echoed as it came
}

TEST_F(ServeSupervisorTest, WorkerGetsTheModelAndAnEphemeralPort) {
  // The fake worker prints its arguments and exits: the error names them.
  WriteScript("tessera-worker", "echo \"args: $*\" >&2; exit 1");
  WriteScript("tessera-router", "exit 0");
  const Result r = Serve("--model /m.gguf --threads 3 --kv-cache-mb 64 --max-num-seqs 8");
  EXPECT_THAT(r.err, HasSubstr("args: --model /m.gguf --listen 127.0.0.1:0 --threads 3 "
                               "--max-num-seqs 8 --kv-cache-mb 64"));
}

TEST_F(ServeSupervisorTest, RouterThatExitsEarlyStopsTheWorker) {
  WriteScript("tessera-worker",
              "echo 'tessera-worker listening on 127.0.0.1:5555'; "
              "exec sleep 60");
  WriteScript("tessera-router", "echo \"args: $*\" >&2; echo 'bind failed' >&2; exit 2");
  const Result r = Serve("--max-num-batched-tokens 512 --drain-timeout-s 4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("args: --model models/SmolLM2-135M-Instruct.Q4_1.gguf --worker "
                               "127.0.0.1:5555 --listen 127.0.0.1:0 --max-num-batched-tokens 512 "
                               "--drain-timeout-s 4"));
  EXPECT_THAT(LastLine(r.err), StartsWith("tessera: error: tessera-router exited before "
                                          "listening (exit status 2)"));
  EXPECT_LT(r.seconds, 30);  // the sleeping worker was stopped, not waited for
}

// --workers 2: two workers (named by index, worker i's metrics on P + i), both addresses to the
// router in index order; a cpu worker gets no --cuda-device.
TEST_F(ServeSupervisorTest, EveryWorkerGoesToTheRouter) {
  WriteScript("tessera-worker",
              "echo \"args: $*\" >&2; case \"$*\" in *'--metrics-port 7001'*) p=5556;; "
              "*) p=5555;; esac; echo \"tessera-worker listening on 127.0.0.1:$p\"; "
              "exec sleep 60");
  WriteScript("tessera-router", "echo \"args: $*\" >&2; exit 2");
  const Result r = Serve("--workers 2 --device cpu --worker-metrics-port 7000");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("[tessera-worker 0] args: --model models/SmolLM2-135M-Instruct."
                               "Q4_1.gguf --listen 127.0.0.1:0 --device cpu --metrics-host "
                               "127.0.0.1 --metrics-port 7000\n"));
  EXPECT_THAT(r.err, HasSubstr("[tessera-worker 1] args: --model models/SmolLM2-135M-Instruct."
                               "Q4_1.gguf --listen 127.0.0.1:0 --device cpu --metrics-host "
                               "127.0.0.1 --metrics-port 7001\n"));
  EXPECT_THAT(r.err, HasSubstr("[tessera-router] args: --model models/SmolLM2-135M-Instruct."
                               "Q4_1.gguf --worker 127.0.0.1:5555 --worker 127.0.0.1:5556 "
                               "--listen 127.0.0.1:0"));
  EXPECT_LT(r.seconds, 30);  // both sleeping workers were stopped, not waited for
}

TEST_F(ServeSupervisorTest, ChildThatNeverListensTimesOut) {
  WriteScript("tessera-worker", "echo 'still loading'; exec sleep 60");
  WriteScript("tessera-router", "exit 0");
  const Result r = Serve("--startup-timeout-s 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(LastLine(r.err), HasSubstr("tessera-worker did not report \"tessera-worker "
                                         "listening on ...\" within 1 s"));
  EXPECT_LT(r.seconds, 30);
}

TEST_F(ServeSupervisorTest, RouterThatIsNeverServingTimesOut) {
  // Both say they listen, but nothing answers grpc.health.v1 at the router's address.
  WriteScript("tessera-worker", "echo 'tessera-worker listening on 127.0.0.1:5555'; exec sleep 60");
  WriteScript("tessera-router", "echo 'tessera-router listening on 127.0.0.1:1'; exec sleep 60");
  const Result r = Serve("--startup-timeout-s 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");  // never claimed to be listening
  EXPECT_THAT(LastLine(r.err), HasSubstr("tessera-router at 127.0.0.1:1 was not SERVING within 2 s"));
  EXPECT_LT(r.seconds, 30);
}

TEST_F(ServeSupervisorTest, MissingBinaryIsNamed) {
  WriteScript("tessera-router", "exit 0");
  const Result r = Serve("");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(LastLine(r.err), HasSubstr("tessera-worker not found at "));
}

}  // namespace
