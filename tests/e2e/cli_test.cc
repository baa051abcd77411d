// Runs the real `tessera` and `tessera-make-tiny-model` binaries and checks what a person sees.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "kernels/cuda/device_query.h"
#include "tests/testing/bin_dir.h"
#include "tests/testing/tiny_hybrid_gguf.h"
#include "tests/unique_temp_path.h"

namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string ShellQuote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs build/bin/<binary> with `args` (already shell-quoted), capturing stdout and stderr;
// `prefix` goes before the binary (e.g. "timeout 5").
CommandResult RunBinary(const std::string& binary, const std::string& args,
                        const std::string& prefix = "") {
  std::filesystem::path dir = tessera::testing_util::UniqueTempPath("cli_test");
  std::filesystem::create_directories(dir);
  std::string command =
      absl::StrCat(prefix, " ", tessera::testing_util::TesseraBinDir(), "/", binary, " ", args,
                   " >", (dir / "out").string(), " 2>", (dir / "err").string());
  int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(dir / "out");
  result.err = ReadFile(dir / "err");
  return result;
}

void RequireDefaultModel() {
  ASSERT_TRUE(std::filesystem::exists(kDefaultModel))
      << kDefaultModel << " is missing: run scripts/fetch_model.sh";
}

// Without --model the default model is found relative to the install (the checkout above
// build/bin), from any directory.
TEST(TesseraInspect, TheDefaultModelIsFoundFromAnyDirectory) {
  RequireDefaultModel();
  const CommandResult r = RunBinary("tessera", "inspect", "cd / &&");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("model: +/.*models/SmolLM2-135M-Instruct.Q4_1.gguf\n"));
}

// Without a GPU `tessera devices` says so and exits 0; with one it lists it.
TEST(TesseraDevices, ListsTheGpusOrSaysThereIsNone) {
  const CommandResult r = RunBinary("tessera", "devices");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto gpus = tessera::cuda::QueryCudaDevices();
  if (gpus.ok() && !gpus->empty()) {
    EXPECT_THAT(r.out, HasSubstr("[0] "));
  } else {
    EXPECT_THAT(r.out, HasSubstr("no CUDA GPU: "));
  }
}

TEST(TesseraInspect, ShowsTheDefaultModelsRealHyperParameters) {
  RequireDefaultModel();
  CommandResult r = RunBinary("tessera", absl::StrCat("inspect ", kDefaultModel));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("architecture: +llama\n"));
  EXPECT_THAT(r.out, ContainsRegex("layers: +30\n"));
  EXPECT_THAT(r.out, ContainsRegex("hidden: +576\n"));
  EXPECT_THAT(r.out, ContainsRegex("heads: +9\n"));
  EXPECT_THAT(r.out, ContainsRegex("kv heads: +3\n"));
  EXPECT_THAT(r.out, ContainsRegex("vocab: +49152\n"));
  EXPECT_THAT(r.out, ContainsRegex("tensors: +272 \\(F32 x61, Q4_1 x210, Q8_0 x1\\)"));
  EXPECT_THAT(r.out, ContainsRegex("tokenizer: +gpt2 \\(pre-tokenizer smollm\\), 49152 tokens, "
                                   "48900 merges"));
  EXPECT_THAT(r.out, ContainsRegex("chat template: +jinja \\(chatml"));
  EXPECT_THAT(r.out, ContainsRegex("can serve: +yes \\(cpu and cuda backends; completions and "
                                   "chat\\)\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("unsupported")));
}

TEST(TesseraInspect, MissingFileIsOneLineErrorAndNonZeroExit) {
  CommandResult r = RunBinary("tessera", "inspect /nonexistent/model.gguf");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/model.gguf"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(TesseraInspect, NotAGgufFileIsOneLineErrorAndNonZeroExit) {
  std::filesystem::path bogus = tessera::testing_util::UniqueTempPath("bogus.gguf");
  std::ofstream(bogus) << "this is not a gguf file at all";
  CommandResult r = RunBinary("tessera", absl::StrCat("inspect ", bogus.string()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("magic"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(TesseraInspect, ReadsTheTinyGeneratedModel) {
  std::filesystem::path tiny = tessera::testing_util::UniqueTempPath("cli_tiny.gguf");
  CommandResult made = RunBinary("tessera-make-tiny-model",
                           absl::StrCat("--out ", tiny.string(), " --layers 3 --seed 7"));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_THAT(made.out, ContainsRegex("tessera-make-tiny-model: wrote .*cli_tiny.gguf \\(llama "
                                      "gguf, [0-9]+ bytes\\)\n"));
  CommandResult r = RunBinary("tessera", absl::StrCat("inspect --tensors ", tiny.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("layers: +3\n"));
  EXPECT_THAT(r.out, HasSubstr("blk.2.ffn_down.weight"));
  EXPECT_THAT(r.out, ContainsRegex("chat template: +jinja \\(chatml"));
}

// What `tessera serve` cannot run is said plainly, with why: an architecture no model definition
// serves (the tiny model relabelled "bloom"; exit 0, the file itself was read), and a chat
// template that is not valid Jinja (completions only). Both are byte patches of the same length.
TEST(TesseraInspect, SaysPlainlyWhenAFileCannotBeServed) {
  const std::filesystem::path tiny = tessera::testing_util::UniqueTempPath("cli_unserved.gguf");
  CommandResult made = RunBinary("tessera-make-tiny-model",
                                 absl::StrCat("--out ", tiny.string(), " --layers 1"));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::ifstream in(tiny, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto patched = [&](const std::string& after, const std::string& from,
                           const std::string& to) {
    std::string out = bytes;
    const size_t at = out.find(from, out.find(after));
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) out.replace(at, from.size(), to);
    const std::filesystem::path path = tessera::testing_util::UniqueTempPath("cli_patched.gguf");
    std::ofstream(path, std::ios::binary) << out;
    return path.string();
  };
  CommandResult r = RunBinary(
      "tessera", "inspect " + patched("general.architecture", "llama", "bloom"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("architecture: +bloom\n"));
  EXPECT_THAT(r.out, HasSubstr("can serve:      no: architecture 'bloom' is not supported "
                               "(supported: llama, qwen2, qwen3, qwen3next, qwen35, qwen35moe)\n"));
  r = RunBinary("tessera", "inspect " + patched("tokenizer.chat_template", "%}", "%%"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("can serve:      yes, completions only: chat requests are "
                               "refused because the chat template is unusable (chat template is "
                               "not valid Jinja"));
}

// A Hugging Face safetensors directory (the tiny qwen3's twin, in two shards): the source format
// with its shards and dtypes, the hyper-parameters, and `tessera tokenize` ids equal to the GGUF's.
TEST(TesseraInspect, ReadsASafetensorsDirectoryLikeItsGgufTwin) {
  const std::string dir = tessera::testing_util::UniqueTempPath("cli_qwen3_hf");
  const std::string gguf = tessera::testing_util::UniqueTempPath("cli_qwen3.gguf");
  for (const std::string& out : {absl::StrCat("--format safetensors --shards 2 --out ", dir),
                                 absl::StrCat("--out ", gguf)}) {
    CommandResult made = RunBinary("tessera-make-tiny-model", "--arch qwen3 --seed 2 " + out);
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  CommandResult r = RunBinary("tessera", absl::StrCat("inspect ", dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("format: +safetensors directory "
                                   "\\(2 shards; F16 x3, F32 x[0-9]+\\)\n"));
  EXPECT_THAT(r.out, ContainsRegex("architecture: +qwen3\n"));
  EXPECT_THAT(r.out, ContainsRegex("rope: +theta 10000, neox mode"));
  EXPECT_THAT(r.out, ContainsRegex("tokenizer: +gpt2 \\(pre-tokenizer smollm\\), 459 tokens"));
  EXPECT_THAT(r.out, ContainsRegex("chat template: +jinja \\(chatml"));
  CommandResult gguf_info = RunBinary("tessera", absl::StrCat("inspect ", gguf));
  EXPECT_THAT(gguf_info.out, ContainsRegex("format: +GGUF file\n"));
  const std::string text = ShellQuote("<|im_start|>user\nHello, tiny world 42!<|im_end|>");
  CommandResult from_dir = RunBinary("tessera", absl::StrCat("tokenize ", dir, " ", text));
  CommandResult from_gguf = RunBinary("tessera", absl::StrCat("tokenize ", gguf, " ", text));
  ASSERT_EQ(from_dir.exit_code, 0) << from_dir.err;
  EXPECT_EQ(from_dir.out, from_gguf.out);
  EXPECT_GT(from_dir.out.size(), 10u);
}

TEST(TesseraInspect, ADirectoryWithoutConfigJsonIsOneLineError) {
  const std::string dir = tessera::testing_util::UniqueTempPath("cli_empty_dir");
  std::filesystem::create_directories(dir);
  CommandResult r = RunBinary("tessera", absl::StrCat("inspect ", dir));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("is a directory without config.json"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A hybrid Gated-DeltaNet MoE file (written here with llama.cpp's keys and tensor names): the
// layer layout, the experts and the recurrent state a sequence carries.
TEST(TesseraInspect, ShowsAHybridModelsLayoutExpertsAndState) {
  std::filesystem::path path = tessera::testing_util::UniqueTempPath("cli_qwen35moe.gguf");
  ASSERT_TRUE(tessera::testing_util::TinyHybridGguf("qwen35moe").WriteToFile(path.string()).ok());
  CommandResult r = RunBinary("tessera", absl::StrCat("inspect ", path.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("architecture: +qwen35moe\n"));
  EXPECT_THAT(r.out,
              ContainsRegex("layers: +8 = 6 GDN \\+ 2 attention \\(every 4th: 3, 7\\)\n"));
  EXPECT_THAT(r.out, ContainsRegex("head dim: +16 \\(rope dim 8\\)\n"));
  EXPECT_THAT(r.out, ContainsRegex("gdn: +conv kernel 4 over 64 channels, 2 key heads x 8, "
                                   "4 value heads x 8 \\(tiled onto key heads\\)\n"));
  EXPECT_THAT(r.out, ContainsRegex("experts: +4, 2 used per token, expert ffn 16, shared expert "
                                   "ffn 24\n"));
  // 6 GDN layers x ((4 - 1) x 64 conv channels + 4 x 8 x 8 state) x 4 bytes.
  EXPECT_THAT(r.out, ContainsRegex("state/sequence: +10752 bytes \\(10.5 KiB\\) f32 over 6 GDN "
                                   "layers \\(conv 4608 \\+ delta rule 6144\\)\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("ffn: ")));  // no dense FFN width in this file
  std::filesystem::remove(path);
}

// A hybrid file whose tensors disagree with its metadata, or whose metadata is inconsistent: one
// line naming the tensor or key, nothing on stdout, a non-zero exit.
TEST(TesseraInspect, BadHybridFilesAreOneLineErrorsNamingTheTensorOrKey) {
  tessera::testing_util::TinyHybridGguf missing_a("qwen35");
  missing_a.RemoveTensor("blk.2.ssm_a");
  tessera::testing_util::TinyHybridGguf zero_kernel("qwen3next");
  zero_kernel.SetUint32(zero_kernel.Key("ssm.conv_kernel"), 0);
  tessera::testing_util::TinyHybridGguf too_many_used("qwen35moe");
  too_many_used.SetUint32(too_many_used.Key("expert_used_count"), 5);
  const std::pair<const tessera::testing_util::TinyHybridGguf*, std::string> cases[] = {
      {&missing_a, "blk.2.ssm_a: missing"},
      {&zero_kernel, "'qwen3next.ssm.conv_kernel' = 0 is out of range"},
      {&too_many_used, "'qwen35moe.expert_used_count' = 5 exceeds 'qwen35moe.expert_count' = 4"}};
  for (const auto& [fixture, error] : cases) {
    std::filesystem::path path = tessera::testing_util::UniqueTempPath("cli_bad_hybrid.gguf");
    ASSERT_TRUE(fixture->WriteToFile(path.string()).ok());
    CommandResult r = RunBinary("tessera", absl::StrCat("inspect ", path.string()));
    EXPECT_NE(r.exit_code, 0) << error;
    EXPECT_THAT(r.err, HasSubstr(error));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "");
    std::filesystem::remove(path);
  }
}

// int8 activations never fall back to the exact matmul for weights they cannot read: the tiny
// model's F16 feed-forward weights make `generate --activations int8` a one-line error naming
// them, not a silently exact run.
TEST(TesseraGenerate, Int8ActivationsRefuseAModelTheyCannotFullyPack) {
  std::filesystem::path tiny = tessera::testing_util::UniqueTempPath("cli_tiny_int8.gguf");
  CommandResult made = RunBinary("tessera-make-tiny-model",
                                 absl::StrCat("--out ", tiny.string(), " --layers 2 --seed 3"));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  CommandResult r = RunBinary("tessera", absl::StrCat("generate --model ", tiny.string(),
                                                      " --prompt hi --max-tokens 2 --threads 1"
                                                      " --activations int8"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("int8 activations need every matmul weight"));
  EXPECT_THAT(r.err, HasSubstr("blk.0.ffn_down"));
  EXPECT_EQ(r.out, "");
  CommandResult exact = RunBinary("tessera", absl::StrCat("generate --model ", tiny.string(),
                                                          " --prompt hi --max-tokens 2 --threads 1"));
  EXPECT_EQ(exact.exit_code, 0) << exact.err;
  std::filesystem::remove(tiny);
}

TEST(TesseraTokenize, PrintsIdsThatDecodeBackThroughPieces) {
  RequireDefaultModel();
  CommandResult r = RunBinary("tessera", absl::StrCat("tokenize ", kDefaultModel, " ",
                                                ShellQuote("<|im_start|>user\nHello world")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // <|im_start|> is id 1 in SmolLM2's vocab; the rest is ordinary BPE.
  EXPECT_THAT(r.out, ContainsRegex("^1 [0-9 ]+\n$"));
  CommandResult pieces = RunBinary("tessera", absl::StrCat("tokenize --pieces ", kDefaultModel, " ",
                                                     ShellQuote("Hello world")));
  ASSERT_EQ(pieces.exit_code, 0) << pieces.err;
  EXPECT_THAT(pieces.out, ContainsRegex("\tHello\n[0-9]+\tĠworld\n$"));
}

// `tessera tokenize` must print exactly the ids of the committed oracle (HF tokenizers) for every
// corpus text a shell argument can carry (no NUL bytes).
TEST(TesseraTokenize, MatchesTheOracleOnTheWholeCorpus) {
  RequireDefaultModel();
  nlohmann::json reference =
      nlohmann::json::parse(ReadFile("tests/data/tokenizer/smollm2_reference.json"));
  int num_checked = 0;
  for (const nlohmann::json& entry : reference.at("cases")) {
    const std::string text = entry.at("text").get<std::string>();
    if (text.empty() || text.find('\0') != std::string::npos) continue;
    const std::vector<int> expected = entry.at("ids").get<std::vector<int>>();
    CommandResult r =
        RunBinary("tessera", absl::StrCat("tokenize ", kDefaultModel, " ", ShellQuote(text)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, absl::StrCat(absl::StrJoin(expected, " "), "\n")) << "text: " << text;
    ++num_checked;
  }
  EXPECT_GE(num_checked, 40);
}

// The model is taken as inspect takes it: positional, --model, or the default model; given twice
// it is a one-line error.
TEST(TesseraTokenize, TakesTheModelLikeInspect) {
  RequireDefaultModel();
  const std::string text = ShellQuote("Hello world");
  CommandResult positional = RunBinary("tessera", absl::StrCat("tokenize ", kDefaultModel, " ", text));
  ASSERT_EQ(positional.exit_code, 0) << positional.err;
  for (const std::string& args : {absl::StrCat("tokenize ", text),
                                  absl::StrCat("tokenize --model ", kDefaultModel, " ", text)}) {
    CommandResult r = RunBinary("tessera", args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    EXPECT_EQ(r.out, positional.out) << args;
  }
  CommandResult twice = RunBinary(
      "tessera", absl::StrCat("tokenize --model ", kDefaultModel, " ", kDefaultModel, " ", text));
  EXPECT_NE(twice.exit_code, 0);
  EXPECT_THAT(twice.err, HasSubstr("give the model once"));
}

TEST(TesseraTokenize, BadModelPathIsOneLineError) {
  CommandResult r = RunBinary("tessera", "tokenize /nonexistent.gguf hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent.gguf"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Backend selection on tessera-worker (worker/runner_factory.h): every failure is one line on
// stderr naming the problem, and exit status 1; --device auto says what it picked and why.
class WorkerDeviceFlags : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::filesystem::create_directories(Dir());
    MakeTiny("--hidden 128 --heads 2 --kv-heads 1 --ffn 256", Head64());
    MakeTiny("--hidden 64 --heads 4 --kv-heads 2 --ffn 128", Head16());
  }
  static std::filesystem::path Dir() {
    static const std::filesystem::path dir = tessera::testing_util::UniqueTempPath("device_flags");
    return dir;
  }
  static std::string Head64() { return (Dir() / "head64.gguf").string(); }
  static std::string Head16() { return (Dir() / "head16.gguf").string(); }
  static void MakeTiny(const std::string& shape, const std::string& out) {
    const CommandResult made =
        RunBinary("tessera-make-tiny-model", absl::StrCat("--layers 1 ", shape, " --out ", out));
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  // tessera-worker with `args`; one that starts serving is stopped (SIGTERM) after 8 s.
  static CommandResult Worker(const std::string& model, const std::string& args) {
    return RunBinary("tessera-worker",
                     absl::StrCat("--model ", model, " --listen 127.0.0.1:0 ", args),
                     "timeout 8");
  }
  static bool HasCudaGpu() {
    auto devices = tessera::cuda::QueryCudaDevices();
    return devices.ok() && !devices->empty();
  }
  static void ExpectOneLineError(const CommandResult& r, const std::string& what) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr(what));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
};

TEST_F(WorkerDeviceFlags, CudaWithoutAGpuIsOneLineErrorAndAutoFallsBackToCpuSayingWhy) {
  if (HasCudaGpu()) {
    // With a GPU, --device cuda starts; auto picks it.
    const CommandResult r = Worker(Head64(), "--device auto --kv-cache-mb 64");
    EXPECT_THAT(r.err, HasSubstr("--device auto: CUDA device"));
    return;
  }
  // "no usable CUDA device: <driver error>" (or, in a build without CUDA, that the build has none).
  ExpectOneLineError(Worker(Head64(), "--device cuda"), "--device cuda: ");
  const CommandResult r = Worker(Head64(), "--device auto --kv-cache-mb 64");
  EXPECT_THAT(r.err, HasSubstr("--device auto: "));
  EXPECT_THAT(r.err, HasSubstr("using cpu"));
  EXPECT_THAT(r.out, HasSubstr("tessera-worker listening on"));
}

TEST_F(WorkerDeviceFlags, BadValuesUnsupportedShapesAndTooLittleMemoryAreOneLineErrors) {
  ExpectOneLineError(Worker(Head64(), "--device tpu"),
                     "unknown --device 'tpu' (expected auto, cpu, cuda or emulated)");
  ExpectOneLineError(Worker(Head64(), "--device emulated --dtype f8"),
                     "unknown dtype 'f8' (expected bf16, f16 or f32)");
  ExpectOneLineError(Worker(Head64(), "--device cpu --dtype bf16"),
                     "--dtype bf16 is for the cuda backend");
  ExpectOneLineError(Worker(Head64(), "--device emulated --cuda-graphs sometimes"),
                     "sometimes");
  // --cuda-device picks a GPU: nothing to pick on the cpu backend or the emulated device.
  ExpectOneLineError(Worker(Head64(), "--device cpu --cuda-device 1"),
                     "--cuda-device selects a CUDA GPU (--device cuda or auto); --device cpu has "
                     "none to select");
  ExpectOneLineError(Worker(Head64(), "--device emulated --cuda-device 0"),
                     "--device emulated has none to select");
  ExpectOneLineError(Worker(Head16(), "--device emulated"),
                     "no attention kernel for head_dim 16");
  ExpectOneLineError(
      Worker(Head64(), "--device emulated --emulated-memory-mb 64 --gpu-memory-utilization 0.1"),
      "too little device memory for the KV cache");
}

// --load-format dummy (worker/runner_factory.h): the model file is not read, the shape's random
// weights are made on the device; the cpu backend and unknown shapes are one-line errors.
TEST_F(WorkerDeviceFlags, DummyLoadFormatReadsNoModelFileAndNeedsADevice) {
  const CommandResult served = Worker("/nonexistent.gguf",
                                      "--load-format dummy --dummy-shape tiny --device emulated "
                                      "--emulated-memory-mb 256 --max-num-seqs 4");
  EXPECT_THAT(served.out, HasSubstr("tessera-worker listening on")) << served.err;
  EXPECT_THAT(served.err, HasSubstr("tiny-dummy (llama)"));
  ExpectOneLineError(Worker(Head64(), "--load-format dummy --dummy-shape tiny --device cpu"),
                     "--load-format dummy needs a device backend (--device cuda or emulated)");
  ExpectOneLineError(Worker(Head64(), "--load-format dummy --dummy-shape llama-9 --device "
                                      "emulated"),
                     "unknown synthetic model shape 'llama-9' (known: llama-3.1-8b, "
                     "qwen2.5-1.5b, tiny, qwen3-next-80b-a3b-l12, tiny-hybrid)");
  ExpectOneLineError(Worker(Head64(), "--load-format gguf"),
                     "unknown --load-format 'gguf' (expected auto or dummy)");
}

}  // namespace
