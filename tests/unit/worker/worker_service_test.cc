// The Worker gRPC service over a real server on 127.0.0.1 (port 0) and a real client channel:
// Describe, pipelined Run round trips equal to offline generation, a bad plan ending the stream
// with INVALID_ARGUMENT, one stream at a time, and each new stream starting clean.
#include "worker/worker_service.h"

#include <chrono>
#include <cstring>
#include <memory>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/tokenizer/tokenizer.h"
#include "common/util/worker_handshake.h"
#include "tests/unit/worker/sim_router.h"
#include "tests/unit/worker/tiny_model_fixture.h"
#include "worker/offline_generation.h"

namespace tessera::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SimRequest;
using testing::SimRouter;

using Stream = grpc::ClientReaderWriter<v1::StepPlan, v1::StepResult>;

constexpr int kBlockSize = 4;
constexpr int kNumBlocks = 64;
constexpr int kMaxNumSeqs = 4;

class WorkerServiceTest : public testing::TinyModelTest {
 protected:
  void SetUp() override {
    TinyModelTest::SetUp();  // fails the test when the suite's model did not load
    if (HasFatalFailure()) return;
    runner_ = MakeRunner(kBlockSize, kNumBlocks);
    service_ = std::make_unique<WorkerService>(
        runner_.get(), WorkerServiceOptions{.max_num_seqs = kMaxNumSeqs,
                                            .model_name = "tiny",
                                            .eos_token_ids = {0},
                                            .bos_token_id = 1,
                                            .device = "2 threads, test"});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Worker::NewStub(channel_);
  }

  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_.reset();
    service_.reset();
  }

  // Runs every request of `router` over `stream` with one plan in flight ahead of the result
  // being read, as the router does. Returns the results' count.
  static int DrivePipelined(Stream& stream, SimRouter& router) {
    int in_flight = 0;
    int results = 0;
    v1::StepResult result;
    while (!router.Done() || in_flight > 0) {
      // Keep two plans outstanding: send N+1 before reading N.
      while (in_flight < 2 && !router.Done()) {
        EXPECT_TRUE(stream.Write(router.NextPlan()));
        ++in_flight;
      }
      if (!stream.Read(&result)) {
        ADD_FAILURE() << "stream ended early";
        return results;
      }
      --in_flight;
      ++results;
      EXPECT_TRUE(router.OnResult(result)) << result.DebugString();
    }
    return results;
  }

  std::unique_ptr<CpuModelRunner> runner_;
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Worker::Stub> stub_;
};

TEST_F(WorkerServiceTest, DescribeReportsModelAndCapacity) {
  grpc::ClientContext context;
  v1::DescribeResponse response;
  ASSERT_TRUE(stub_->Describe(&context, v1::DescribeRequest(), &response).ok());
  EXPECT_THAT(response.worker_id(), ::testing::StartsWith("w-"));
  EXPECT_EQ(response.worker_id(), service_->worker_id());
  EXPECT_EQ(response.model_name(), "tiny");
  EXPECT_EQ(response.architecture(), "llama");
  EXPECT_EQ(response.vocab_size(), config().vocab_size);
  EXPECT_THAT(response.eos_token_ids(), ElementsAre(0));
  EXPECT_EQ(response.bos_token_id(), 1);
  EXPECT_EQ(response.max_context(), 256);
  EXPECT_EQ(response.block_size(), kBlockSize);
  EXPECT_EQ(response.num_kv_blocks(), kNumBlocks);
  EXPECT_EQ(response.max_num_seqs(), kMaxNumSeqs);
  EXPECT_EQ(response.kv_pool_bytes(), runner_->kv_pool().bytes);
  EXPECT_GT(response.kv_pool_bytes(), 0);
  EXPECT_EQ(response.backend(), "cpu");
  EXPECT_EQ(response.device(), "2 threads, test");
  EXPECT_THAT(response.features(), ::testing::Contains("logprobs"));
  EXPECT_EQ(response.max_logprobs(), 20);
  // An attention-only model shares cached prefixes by block and has no recurrent state.
  EXPECT_THAT(response.features(), ::testing::Contains("prefix_cache"));
  EXPECT_EQ(response.prefix_sharing(), v1::PREFIX_SHARING_BLOCKS);
  EXPECT_EQ(response.attention_layers(), config().num_layers);
  EXPECT_EQ(response.linear_attention_layers(), 0);
  EXPECT_EQ(response.state_bytes_per_sequence(), 0);
}

// PrepareGrammar compiles a guided request's grammar on a gRPC thread (the router calls it
// before scheduling the request, so no step waits for a compile): OK for a good grammar,
// INVALID_ARGUMENT naming the problem for one that does not compile, FAILED_PRECONDITION on a
// worker without a vocabulary (which also leaves "structured_outputs" out of Describe).
TEST_F(WorkerServiceTest, PrepareGrammarCompilesOffTheStepThread) {
  v1::Grammar grammar;
  grammar.set_kind(v1::GRAMMAR_KIND_JSON_SCHEMA);
  grammar.set_text(R"({"type": "object", "properties": {"n": {"type": "integer"}}})");
  v1::PrepareGrammarResponse response;
  {
    grpc::ClientContext context;
    EXPECT_EQ(stub_->PrepareGrammar(&context, grammar, &response).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(service_->description().features(),
                ::testing::Not(::testing::Contains("structured_outputs")));
  }
  auto tokenizer = tokenizer::Tokenizer::FromGguf(*model_->file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const GrammarVocabulary vocabulary = GrammarVocabularyOf(**tokenizer);
  auto runner = MakeRunner(kBlockSize, kNumBlocks);
  WorkerService service(runner.get(), WorkerServiceOptions{.max_num_seqs = kMaxNumSeqs,
                                                           .grammar_vocabulary = &vocabulary});
  EXPECT_THAT(service.description().features(), ::testing::Contains("structured_outputs"));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Worker::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    const grpc::Status status = stub->PrepareGrammar(&context, grammar, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_GE(response.compile_seconds(), 0.0);
  }
  {
    grpc::ClientContext context;
    grammar.set_kind(v1::GRAMMAR_KIND_REGEX);
    grammar.set_text("a(b");
    const grpc::Status status = stub->PrepareGrammar(&context, grammar, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), ::testing::HasSubstr("regex is invalid"));
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

// A hybrid model's Describe: its layer kinds and per-sequence state, and no prefix sharing (its
// recurrent state has no snapshots at block boundaries yet).
TEST(WorkerServiceDescribeTest, AHybridModelReportsItsStateAndSharesNoPrefix) {
  auto model = LoadModel("tests/data/hybrid/tiny-qwen3next.gguf");
  ASSERT_TRUE(model.ok()) << model.status();
  kernels::cpu::ThreadPool pool(1);
  CpuModelRunner runner((*model)->config, &(*model)->plan, (*model)->weights.get(), &pool,
                        {.block_size = 16, .num_kv_blocks = 8, .max_num_seqs = 2});
  WorkerService service(&runner, WorkerServiceOptions{.max_num_seqs = 2});
  const v1::DescribeResponse& d = service.description();
  EXPECT_EQ(d.architecture(), "qwen3next");
  EXPECT_EQ(d.prefix_sharing(), v1::PREFIX_SHARING_NONE);
  EXPECT_THAT(d.features(), ::testing::Not(::testing::Contains("prefix_cache")));
  EXPECT_EQ(d.attention_layers(), 1);
  EXPECT_EQ(d.linear_attention_layers(), 3);
  // 3 GDN layers x (conv (4-1) x (2*2*16 + 4*16) + state 4 x 16 x 16) floats.
  EXPECT_EQ(d.state_bytes_per_sequence(), 3 * (3 * 128 + 4 * 16 * 16) * 4);
}

TEST_F(WorkerServiceTest, PipelinedRunMatchesOfflineGeneration) {
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Run(&context);
  SimRouter router(kBlockSize, kNumBlocks, kMaxNumSeqs);
  for (int i = 0; i < 3; ++i) {
    SimRequest request{.prompt = Prompt(5 + 7 * i, i), .max_tokens = 6 + i,
                       .arrival_step = 1 + 2 * i, .chunk = 4};
    request.sampling.set_temperature(i == 1 ? 0.8f : 0.0f);
    request.sampling.set_seed(11);
    router.Add(request);
  }
  const int results = DrivePipelined(*stream, router);
  EXPECT_GT(results, 0);
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  for (int i = 0; i < 3; ++i) {
    const SimRequest& r = router.request(i);
    auto alone_runner = MakeRunner(kBlockSize, kNumBlocks);
    GenerationRequest alone{.prompt = r.prompt, .max_tokens = r.max_tokens,
                            .sampling = SamplingParamsFromProto(r.sampling),
                            .stop_token_ids = {}};
    auto expected = GenerateOffline(*alone_runner, alone, nullptr);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(r.tokens, expected->tokens) << "request " << i;
    ASSERT_EQ(r.logprobs.size(), expected->logprobs.size());
    EXPECT_EQ(std::memcmp(r.logprobs.data(), expected->logprobs.data(),
                          r.logprobs.size() * sizeof(float)),
              0)
        << "request " << i;
  }
}

TEST_F(WorkerServiceTest, BadPlanEndsTheStreamWithInvalidArgument) {
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Run(&context);
  SimRouter router(kBlockSize, kNumBlocks, kMaxNumSeqs);
  router.Add({.prompt = Prompt(6, 1), .max_tokens = 4});
  ASSERT_TRUE(stream->Write(router.NextPlan()));
  v1::StepResult result;
  ASSERT_TRUE(stream->Read(&result));
  v1::StepPlan bad = router.NextPlan();
  bad.mutable_sequences(0)->add_new_blocks(kNumBlocks);
  ASSERT_TRUE(stream->Write(bad));
  EXPECT_FALSE(stream->Read(&result));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("plan 2: sequences[0].new_blocks[0] = 64 is outside [1, 64)"));
}

TEST_F(WorkerServiceTest, SecondConcurrentRunIsRefusedAndNextStreamStartsClean) {
  grpc::ClientContext first_context;
  std::unique_ptr<Stream> first = stub_->Run(&first_context);
  SimRouter first_router(kBlockSize, kNumBlocks, kMaxNumSeqs);
  first_router.Add({.prompt = Prompt(6, 1), .max_tokens = 50});
  ASSERT_TRUE(first->Write(first_router.NextPlan()));
  v1::StepResult result;
  ASSERT_TRUE(first->Read(&result));  // the first stream is attached now

  grpc::ClientContext second_context;
  std::unique_ptr<Stream> second = stub_->Run(&second_context);
  EXPECT_FALSE(second->Read(&result));
  const grpc::Status refused = second->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("another router is attached"));

  // The first stream is unaffected; it ends with slot 0 still busy.
  ASSERT_TRUE(first->Write(first_router.NextPlan()));
  ASSERT_TRUE(first->Read(&result));
  EXPECT_EQ(result.step(), 2u);
  EXPECT_EQ(result.active_slots(), 1);
  first->WritesDone();
  EXPECT_TRUE(first->Finish().ok());

  // A new stream starts at step 1 with every slot free: slot 0 can be admitted again.
  grpc::ClientContext third_context;
  std::unique_ptr<Stream> third = stub_->Run(&third_context);
  SimRouter third_router(kBlockSize, kNumBlocks, kMaxNumSeqs);
  third_router.Add({.prompt = Prompt(6, 1), .max_tokens = 3});
  EXPECT_GT(DrivePipelined(*third, third_router), 0);
  EXPECT_EQ(third_router.request(0).tokens.size(), 3u);
  third->WritesDone();
  EXPECT_TRUE(third->Finish().ok());
}

// The router counts as connected only once its own stream was accepted, and it learns that
// before it sends any plan (common/util/worker_handshake.h).
TEST_F(WorkerServiceTest, AcceptedStreamIsAnnouncedBeforeAnyPlanRefusedOneIsNot) {
  grpc::ClientContext first_context;
  first_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<Stream> first = stub_->Run(&first_context);
  first->WaitForInitialMetadata();  // no plan sent: returns on the worker's own announcement
  EXPECT_EQ(first_context.GetServerInitialMetadata().count(util::kRunAcceptedMetadata), 1u);

  grpc::ClientContext second_context;
  second_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<Stream> second = stub_->Run(&second_context);
  second->WaitForInitialMetadata();  // returns when the refusal ends the call
  EXPECT_EQ(second_context.GetServerInitialMetadata().count(util::kRunAcceptedMetadata), 0u);
  EXPECT_EQ(second->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  first->WritesDone();
  EXPECT_TRUE(first->Finish().ok());
}

TEST_F(WorkerServiceTest, CancelledStreamDropsItsSlots) {
  {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = stub_->Run(&context);
    SimRouter router(kBlockSize, kNumBlocks, kMaxNumSeqs);
    router.Add({.prompt = Prompt(6, 1), .max_tokens = 50});
    ASSERT_TRUE(stream->Write(router.NextPlan()));
    v1::StepResult result;
    ASSERT_TRUE(stream->Read(&result));
    context.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The server notices the cancellation asynchronously; retry until it lets a new router in.
  for (int attempt = 0; attempt < 100; ++attempt) {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = stub_->Run(&context);
    SimRouter router(kBlockSize, kNumBlocks, kMaxNumSeqs);
    router.Add({.prompt = Prompt(6, 2), .max_tokens = 2});
    stream->Write(router.NextPlan());
    v1::StepResult result;
    if (!stream->Read(&result)) {
      const grpc::Status status = stream->Finish();
      ASSERT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    EXPECT_EQ(result.active_slots(), 1);  // only the new request: the old slot was dropped
    stream->WritesDone();
    while (stream->Read(&result)) {
    }
    EXPECT_TRUE(stream->Finish().ok());
    return;
  }
  FAIL() << "the cancelled stream never detached";
}

}  // namespace
}  // namespace tessera::worker
