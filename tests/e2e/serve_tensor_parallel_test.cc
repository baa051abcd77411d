// `tessera serve --device emulated --tensor-parallel T` (worker/parallel/, DESIGN.md §12): one
// worker spanning T = 2 or 4 emulated devices serves 4 concurrent greedy prompts with the same
// tokens as T = 1 (f32: the sharded sums differ from one device's only by rounding, far below any top-2
// margin of these prompts), ModelInfo describes the ranks, and combinations that cannot shard are
// one-line errors.
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "kernels/cuda/device_query.h"
#include "tests/e2e/serve_process.h"
#include "tests/e2e/serving_harness.h"
#include "tests/e2e/tessera_cli_process.h"
#include "tests/unique_temp_path.h"
#include "tools/convert/tiny_model.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;
using ::testing::HasSubstr;

// 4 heads and 4 KV heads of 64 dims (the attention kernels' smallest head), FFN 256: shards
// into 2 or 4.
std::string TinyShardableModel() {
  static const std::string path = [] {
    const std::string out = testing_util::UniqueTempPath("tp_serve.gguf");
    const absl::Status written = convert::WriteTinyLlamaGguf(
        {.num_layers = 2, .hidden = 256, .num_heads = 4, .num_kv_heads = 4, .ffn = 256,
         .context_length = 128, .seed = 29},
        out);
    EXPECT_TRUE(written.ok()) << written;
    return out;
  }();
  return path;
}

struct Served {
  std::vector<std::vector<int32_t>> tokens;  // per prompt
  std::string device;                        // ModelInfo's description of worker 0
};

// Serves 4 different prompts at once through `tessera serve ... --tensor-parallel tp`.
Served ServeFourPrompts(int tp) {
  ServeProcess serve;
  const absl::Status started = serve.Start(
      {"--model", TinyShardableModel(), "--device", "emulated", "--dtype", "f32",
       "--tensor-parallel", std::to_string(tp), "--max-num-seqs", "4", "--num-kv-blocks", "64"});
  EXPECT_TRUE(started.ok()) << started;
  Served out;
  if (!started.ok()) return out;
  auto stub = v1::Tessera::NewStub(
      grpc::CreateChannel(serve.address(), grpc::InsecureChannelCredentials()));
  std::vector<StreamResult> results(4);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < results.size(); ++i) {
    clients.emplace_back([&, i] {
      v1::GenerateRequest request;
      request.set_text(std::string("Prompt number ") + char('a' + i) + " says hello to");
      request.mutable_sampling()->set_temperature(0.0f);
      request.set_max_tokens(6);
      request.set_ignore_eos(true);
      results[i] = RunGenerate(*stub, request);
    });
  }
  for (std::thread& t : clients) t.join();
  for (const StreamResult& r : results) {
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    out.tokens.push_back(r.token_ids);
  }
  grpc::ClientContext context;
  v1::ModelInfoResponse info;
  EXPECT_TRUE(stub->ModelInfo(&context, v1::ModelInfoRequest(), &info).ok());
  if (info.workers_size() > 0) out.device = info.workers(0).device();
  EXPECT_EQ(serve.Stop(), 0);
  return out;
}

TEST(ServeTensorParallelTest, TwoAndFourRanksServeTheTokensOfOneDevice) {
  const Served one = ServeFourPrompts(1);
  ASSERT_EQ(one.tokens.size(), 4u);
  for (const auto& tokens : one.tokens) EXPECT_EQ(tokens.size(), 6u);
  EXPECT_THAT(one.device, ::testing::Not(HasSubstr("tensor parallel")));
  for (const int tp : {2, 4}) {
    const Served many = ServeFourPrompts(tp);
    EXPECT_EQ(many.tokens, one.tokens) << "--tensor-parallel " << tp;
    EXPECT_THAT(many.device, HasSubstr("tensor parallel, " + std::to_string(tp) +
                                       " ranks (in-process, fixed order)"));
  }
}

// Heads that do not divide, the cpu backend, and more ranks than GPUs are one-line errors.
TEST(ServeTensorParallelTest, CombinationsThatCannotShardAreOneLineErrors) {
  absl::StatusOr<std::vector<cuda::CudaDeviceInfo>> gpus = cuda::QueryCudaDevices();
  const std::string too_few = !gpus.ok() ? "--device cuda: " : "needs 64 CUDA devices";
  for (const auto& [args, error] :
       {std::pair{std::vector<std::string>{"--device", "emulated", "--tensor-parallel", "3"},
                  std::string("--tensor-parallel 3: the model's 4 attention heads do not divide "
                              "into 3 equal shares")},
        std::pair{std::vector<std::string>{"--device", "cpu", "--tensor-parallel", "2"},
                  std::string("--tensor-parallel 2 needs --device cuda or emulated")},
        std::pair{std::vector<std::string>{"--device", "cuda", "--tensor-parallel", "64"},
                  too_few}}) {
    std::vector<std::string> argv = {"serve", "--port", "0", "--http-port", "0", "--model",
                                     TinyShardableModel()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::unique_ptr<process::ChildProcess> serve = SpawnTessera(argv);
    ASSERT_NE(serve, nullptr);
    const std::optional<process::ChildExit> exit = serve->Wait(absl::Seconds(120));
    ASSERT_TRUE(exit.has_value()) << "tessera serve kept running with " << args[3];
    EXPECT_EQ(exit->exit_code, 1);
    EXPECT_THAT(serve->StderrTail(), HasSubstr(error));
  }
}

}  // namespace
}  // namespace tessera::e2e
