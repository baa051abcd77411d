// NVFP4 end to end as a person does it: `tessera quantize --to nvfp4` on the default model, then
// `tessera serve --model` on the result and `tessera generate --addr --chat` through the gRPC
// Generate stream, on the cpu backend and on the emulated cuda device (bf16, the projections
// kept packed: the worker's start-up line says so). Real processes on loopback.
#include <csignal>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/process/child_process.h"
#include "tests/testing/bin_dir.h"
#include "tests/unique_temp_path.h"
#include "tests/e2e/tessera_cli_process.h"

namespace tessera::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";


class QuantizedServingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = testing_util::UniqueTempPath("smollm2-nvfp4.gguf");
    auto [out, exit_code] =
        RunTesseraToEnd({"quantize", "--to", "nvfp4", kDefaultModel, path_}, absl::Seconds(300));
    quantize_exit_ = exit_code;
    quantize_out_ = out;
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }
  void SetUp() override { ASSERT_EQ(quantize_exit_, 0) << quantize_out_; }

  // Serves the quantized model with `device_flags`, asks one chat question with greedy decoding,
  // and returns the answer; `*stderr_tail` gets the end of serve's stderr (the children's).
  static std::string ServeAndAsk(const std::vector<std::string>& device_flags, int max_tokens,
                                 std::string* stderr_tail) {
    std::vector<std::string> args = {"serve", "--model", path_, "--port", "0", "--http-port", "0",
                                     "--kv-cache-mb", "64", "--max-num-seqs", "4"};
    args.insert(args.end(), device_flags.begin(), device_flags.end());
    std::unique_ptr<process::ChildProcess> serve = SpawnTessera(args);
    if (serve == nullptr) return "";
    std::string address;
    const std::regex ready("tessera serve: listening on (\\S+)");
    while (address.empty()) {
      absl::StatusOr<std::string> line = serve->ReadStdoutLine(absl::Seconds(300));
      if (!line.ok()) {
        ADD_FAILURE() << line.status() << "; stderr: " << serve->StderrTail();
        return "";
      }
      std::smatch match;
      if (std::regex_search(*line, match, ready)) address = match[1].str();
    }
    auto [answer, exit_code] =
        RunTesseraToEnd({"generate", "--addr", address, "--chat", "What is the capital of France?",
                  "--max-tokens", std::to_string(max_tokens)},
                 absl::Seconds(600));
    EXPECT_EQ(exit_code, 0) << answer;
    *stderr_tail = serve->StderrTail();
    EXPECT_TRUE(serve->Signal(SIGTERM).ok());
    EXPECT_TRUE(serve->Wait(absl::Seconds(60)).has_value());
    return answer;
  }

  static inline std::string path_;
  static inline int quantize_exit_ = -1;
  static inline std::string quantize_out_;
};

TEST_F(QuantizedServingTest, CpuAnswersFromTheNvfp4Model) {
  std::string stderr_tail;
  const std::string answer =
      ServeAndAsk({"--device", "cpu", "--threads", "2"}, 16, &stderr_tail);
  std::printf("cpu, nvfp4: %s\n", answer.c_str());
  EXPECT_THAT(answer, HasSubstr("Paris"));
}

#if TESSERA_E2E_WITH_EMULATED_DEVICE
// The emulated device runs every projection through the packed NVFP4 kernels (bf16
// activations): the first tokens of its greedy answer are the cpu backend's.
TEST_F(QuantizedServingTest, EmulatedCudaDeviceAnswersWithPackedNvfp4Weights) {
  std::string cpu_tail, device_tail;
  const std::string cpu = ServeAndAsk({"--device", "cpu", "--threads", "2"}, 6, &cpu_tail);
  const std::string device = ServeAndAsk(
      {"--device", "emulated", "--dtype", "bf16"}, 6,
      &device_tail);
  std::printf("cpu: %s\nemulated cuda, nvfp4 packed: %s\n", cpu.c_str(), device.c_str());
  EXPECT_THAT(device_tail, HasSubstr("weights nvfp4 packed: 210 tensors"));
  EXPECT_FALSE(device.empty());
  EXPECT_EQ(device, cpu);
}
#endif

}  // namespace
}  // namespace tessera::e2e
