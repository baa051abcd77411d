// A hybrid Gated-DeltaNet MoE model (tests/data/hybrid/tiny-qwen35moe.gguf: 3 GDN layers and one
// gated-attention layer, 8 experts of which 2 are used, a shared expert) served end to end by
// tessera-worker (cpu) and tessera-router as real processes: concurrent greedy requests give
// each one's sequential tokens (each sequence's recurrent state lives in its own slot), a tiny KV
// pool forces preemptions and the recomputed sequences keep their tokens, a repeated prompt is
// served from the prefix cache through a recurrent-state snapshot and gives the cold run's
// tokens (without snapshots, --state-snapshot-mb 0, it runs cold), and ModelInfo names the
// architecture. The same model on the cuda runner's emulated device (`--device emulated --dtype
// f32`) serves concurrent greedy requests with the cpu worker's tokens.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;

constexpr char kHybridModel[] = "tests/data/hybrid/tiny-qwen35moe.gguf";

// A prompt of `length` ordinary token ids (the fixture's vocabulary has 264).
v1::GenerateRequest GreedyIds(int length, int seed, int max_tokens) {
  v1::GenerateRequest request;
  for (int i = 0; i < length; ++i) {
    request.mutable_token_ids()->add_ids(3 + (seed * 7919 + i * 104729) % 250);
  }
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  return request;
}

class HybridServingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serving_ = new ServingProcesses();
    serving_->set_model(kHybridModel);
    start_ = new absl::Status(serving_->Start({"--device", "cpu", "--threads", "2"}));
  }
  static void TearDownTestSuite() {
    delete serving_;
    delete start_;
  }
  void SetUp() override { ASSERT_TRUE(start_->ok()) << *start_; }

  // Each request alone, one after another.
  static std::vector<std::vector<int32_t>> Sequential(const std::vector<v1::GenerateRequest>& rs) {
    std::vector<std::vector<int32_t>> tokens;
    auto stub = serving_->NewStub();
    for (const v1::GenerateRequest& r : rs) {
      StreamResult result = RunGenerate(*stub, r);
      EXPECT_TRUE(result.status.ok()) << result.status.error_message();
      tokens.push_back(result.token_ids);
    }
    return tokens;
  }

  static ServingProcesses* serving_;
  static absl::Status* start_;
};

ServingProcesses* HybridServingTest::serving_ = nullptr;
absl::Status* HybridServingTest::start_ = nullptr;

TEST_F(HybridServingTest, ConcurrentRequestsGiveEachOnesSequentialTokens) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(GreedyIds(1 + 9 * i, i, 6 + 3 * i));
  const std::vector<std::vector<int32_t>> expected = Sequential(requests);
  const std::vector<StreamResult> got = RunConcurrently(*serving_, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(got[i].status.ok()) << got[i].status.error_message();
    EXPECT_EQ(got[i].token_ids, expected[i]) << "request " << i << " changed under concurrency";
    EXPECT_EQ(got[i].token_ids.size(), static_cast<size_t>(6 + 3 * i));
    EXPECT_GT(got[i].num_responses, 1) << "tokens must stream";
  }
  ExpectEverythingReleased(*serving_);
}

// 70 tokens: the whole blocks within the first 69 end at 64, where the first run saves the state.
TEST_F(HybridServingTest, ARepeatedPromptRestoresTheStateSnapshotAndGivesTheColdTokens) {
  const v1::GenerateRequest request = GreedyIds(70, 33, 12);
  auto stub = serving_->NewStub();
  const StreamResult first = RunGenerate(*stub, request);
  const StreamResult second = RunGenerate(*stub, request);
  ASSERT_TRUE(first.status.ok() && second.status.ok());
  EXPECT_EQ(first.last.usage().cached_tokens(), 0u);
  EXPECT_EQ(second.last.usage().cached_tokens(), 64u);
  EXPECT_EQ(second.token_ids, first.token_ids);
}

TEST_F(HybridServingTest, WithoutSnapshotsARepeatedPromptRunsCold) {
  ServingProcesses cold;
  cold.set_model(kHybridModel);
  ASSERT_TRUE(cold.Start({"--device", "cpu", "--threads", "2", "--state-snapshot-mb", "0"}).ok());
  const v1::GenerateRequest request = GreedyIds(70, 33, 12);
  auto stub = cold.NewStub();
  const StreamResult first = RunGenerate(*stub, request);
  const StreamResult second = RunGenerate(*stub, request);
  ASSERT_TRUE(first.status.ok() && second.status.ok());
  EXPECT_EQ(second.last.usage().cached_tokens(), 0u);
  EXPECT_EQ(second.token_ids, first.token_ids);
}

TEST_F(HybridServingTest, ModelInfoNamesTheHybridArchitecture) {
  auto stub = serving_->NewStub();
  grpc::ClientContext context;
  v1::ModelInfoResponse info;
  ASSERT_TRUE(stub->ModelInfo(&context, v1::ModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.architecture(), "qwen35moe");
  EXPECT_EQ(info.backend(), "cpu");
}

// 4 requests of 20 + 40 tokens in a 10-block pool (144 token slots) with no growth reserved at
// admission: the router admits all four, then preempts; a re-admitted sequence's state is
// cleared and recomputed from its tokens, so every request keeps its sequential tokens.
TEST_F(HybridServingTest, PreemptionUnderATinyKvPoolKeepsTheTokens) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(GreedyIds(20, 10 + i, 40));
  const std::vector<std::vector<int32_t>> expected = Sequential(requests);
  ServingProcesses tight;
  tight.set_model(kHybridModel);
  ASSERT_TRUE(tight.Start({"--device", "cpu", "--threads", "2", "--num-kv-blocks", "10"},
                          {"--kv-reserve-horizon", "0"})
                  .ok());
  const std::vector<StreamResult> got = RunConcurrently(tight, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(got[i].status.ok()) << got[i].status.error_message();
    EXPECT_EQ(got[i].token_ids, expected[i]) << "request " << i;
  }
  EXPECT_GT(tight.Stats().preemptions(), 0);
  ExpectEverythingReleased(tight);
}

// The cuda runner (SIMT-emulated device, f32) serves the hybrid too: concurrent greedy requests
// (decode steps replaying CUDA graphs with padding rows, prompts through the chunked GDN form)
// give exactly the cpu worker's tokens.
TEST_F(HybridServingTest, TheEmulatedCudaWorkerServesTheCpuWorkersTokens) {
#if !TESSERA_E2E_WITH_EMULATED
  GTEST_SKIP() << "this build has no SIMT emulator (--device emulated)";
#else
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(GreedyIds(1 + 23 * i, 20 + i, 8));
  const std::vector<std::vector<int32_t>> expected = Sequential(requests);
  ServingProcesses emulated;
  emulated.set_model(kHybridModel);
  ASSERT_TRUE(emulated.Start({"--device", "emulated", "--dtype", "f32", "--max-num-seqs", "8",
                              "--emulated-memory-mb", "512"})
                  .ok());
  const std::vector<StreamResult> got = RunConcurrently(emulated, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(got[i].status.ok()) << got[i].status.error_message();
    EXPECT_EQ(got[i].token_ids, expected[i]) << "request " << i;
  }
  auto stub = emulated.NewStub();
  grpc::ClientContext context;
  v1::ModelInfoResponse info;
  ASSERT_TRUE(stub->ModelInfo(&context, v1::ModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.backend(), "cuda");
  ExpectEverythingReleased(emulated);
#endif
}

}  // namespace
}  // namespace tessera::e2e
