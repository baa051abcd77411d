// A Hugging Face safetensors directory served end to end: `tessera serve --model DIR` (worker and
// router both reading the directory) gives the same greedy tokens, text and top-5 logprobs (the
// tiny model's greedy tokens repeat, its logprobs do not) as `tessera serve --model` on its GGUF
// twin, for chat (the directory's chat template and tokenizer), raw text and token-id prompts. The
// model is the tiny llama written both ways (tools/convert/hf_export.h), in two shards, so its Q/K
// rotate in NeoX mode from the directory and in normal mode from the GGUF.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/gguf/gguf_file.h"
#include "tests/e2e/serve_process.h"
#include "tests/e2e/serving_harness.h"
#include "tests/unique_temp_path.h"
#include "tools/convert/hf_export.h"
#include "tools/convert/tiny_model.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;

// Writes the tiny llama as a GGUF file and as a two-shard HF directory; "" or what went wrong.
std::string WriteTwin(const std::string& gguf_path, const std::string& dir) {
  const convert::TinyModelOptions options{.num_layers = 2, .seed = 21};
  if (absl::Status s = convert::WriteTinyLlamaGguf(options, gguf_path); !s.ok())
    return s.ToString();
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(gguf_path);
  if (!file.ok()) return file.status().ToString();
  std::filesystem::remove_all(dir);
  const absl::Status exported = convert::ExportHfDirectory(**file, {.num_shards = 2}, dir);
  return exported.ok() ? "" : exported.ToString();
}

std::vector<v1::GenerateRequest> Requests() {
  std::vector<v1::GenerateRequest> requests(3);
  v1::ChatMessage* message = requests[0].mutable_chat()->add_messages();
  message->set_role("user");
  message->set_content("What is the capital of France?");
  requests[1].set_text("The quick brown fox");
  for (int id : {5, 80, 200, 17, 300, 42}) requests[2].mutable_token_ids()->add_ids(id);
  for (v1::GenerateRequest& r : requests) {
    r.mutable_sampling()->set_temperature(0.0f);
    r.set_max_tokens(12);
    r.set_ignore_eos(true);
    r.set_logprobs(true);
    r.set_top_logprobs(5);
  }
  return requests;
}

struct Served {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<v1::TokenLogprob>> logprobs;
  std::vector<std::string> texts;
  std::string architecture;
};

Served Serve(const std::string& model) {
  ServeProcess serve;
  const absl::Status started =
      serve.Start({"--model", model, "--threads", "2", "--kv-cache-mb", "16"});
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return {};
  auto stub = v1::Tessera::NewStub(
      grpc::CreateChannel(serve.address(), grpc::InsecureChannelCredentials()));
  Served served;
  for (const v1::GenerateRequest& request : Requests()) {
    const StreamResult result = RunGenerate(*stub, request);
    EXPECT_TRUE(result.status.ok()) << result.status.error_message() << "\n" << serve.StderrTail();
    served.tokens.push_back(result.token_ids);
    served.texts.push_back(result.text);
    served.logprobs.push_back(result.logprobs);
  }
  grpc::ClientContext context;
  v1::ModelInfoResponse info;
  EXPECT_TRUE(stub->ModelInfo(&context, v1::ModelInfoRequest(), &info).ok());
  served.architecture = info.architecture();
  EXPECT_EQ(serve.Stop(), 0);
  return served;
}

TEST(SafetensorsServingTest, ADirectoryServesItsGgufTwinsGreedyTokens) {
  const std::string gguf_path = testing_util::UniqueTempPath("st_serve_twin.gguf");
  const std::string dir = testing_util::UniqueTempPath("st_serve_twin_hf");
  const std::string error = WriteTwin(gguf_path, dir);
  ASSERT_EQ(error, "");
  const Served from_gguf = Serve(gguf_path);
  const Served from_hf = Serve(dir);
  ASSERT_EQ(from_gguf.tokens.size(), 3u);
  ASSERT_EQ(from_hf.tokens.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(from_hf.tokens[i].size(), 12u) << "request " << i;
    EXPECT_EQ(from_hf.tokens[i], from_gguf.tokens[i]) << "request " << i;
    EXPECT_EQ(from_hf.texts[i], from_gguf.texts[i]) << "request " << i;
    ASSERT_EQ(from_hf.logprobs[i].size(), from_gguf.logprobs[i].size());
    for (size_t t = 0; t < from_hf.logprobs[i].size(); ++t) {
      const v1::TokenLogprob& hf = from_hf.logprobs[i][t];
      const v1::TokenLogprob& gguf = from_gguf.logprobs[i][t];
      ASSERT_EQ(hf.top_logprobs_size(), 5);
      ASSERT_EQ(gguf.top_logprobs_size(), 5);
      for (int k = 0; k < 5; ++k) {
        EXPECT_EQ(hf.top_logprobs(k).token_id(), gguf.top_logprobs(k).token_id());
        EXPECT_NEAR(hf.top_logprobs(k).logprob(), gguf.top_logprobs(k).logprob(), 1e-5)
            << "request " << i << " token " << t << " alternative " << k;
      }
    }
  }
  EXPECT_EQ(from_hf.architecture, "llama");
}

}  // namespace
}  // namespace tessera::e2e
