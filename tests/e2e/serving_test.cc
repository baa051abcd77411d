// End-to-end serving: tessera-worker and tessera-router as real processes on loopback, the
// default model, real gRPC clients. Covers the issue-4 contract: concurrency does not change
// greedy output, cancellation frees everything, a lost worker fails streams with UNAVAILABLE and
// the router recovers, bad input gets a status code and a message.
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;
using ::testing::HasSubstr;
using ::testing::Not;

v1::GenerateRequest GreedyText(const std::string& text, int max_tokens) {
  v1::GenerateRequest request;
  request.set_text(text);
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(max_tokens);
  return request;
}

v1::GenerateRequest ChatRequest(const std::string& message, int max_tokens) {
  v1::GenerateRequest request;
  v1::ChatMessage* m = request.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content(message);
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(max_tokens);
  return request;
}

class ServingTest : public SharedServingTest {};

TEST_F(ServingTest, ChatStreamsTheParisAnswer) {
  auto stub = serving_->NewStub();
  v1::GenerateRequest request = ChatRequest("What is the capital of France?", 32);
  request.set_request_id("paris");
  StreamResult result = RunGenerate(*stub, request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_THAT(result.text, HasSubstr("Paris"));
  EXPECT_EQ(result.last.request_id(), "paris");
  EXPECT_EQ(result.last.finish_reason(), v1::FINISH_REASON_EOS);
  EXPECT_EQ(result.last.usage().completion_tokens(), result.token_ids.size());
  EXPECT_GT(result.last.usage().prompt_tokens(), 10u);
  EXPECT_GT(result.last.timings().time_to_first_token_seconds(), 0.0);
  EXPECT_GE(result.last.timings().total_seconds(),
            result.last.timings().time_to_first_token_seconds());
  EXPECT_GT(result.num_responses, 1) << "tokens must stream, not arrive in one message";
}

TEST_F(ServingTest, StopStringEndsTheStreamBeforeIt) {
  auto stub = serving_->NewStub();
  v1::GenerateRequest request = ChatRequest("What is the capital of France?", 32);
  request.add_stop("Paris");
  StreamResult result = RunGenerate(*stub, request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.last.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(result.last.stop(), "Paris");
  EXPECT_THAT(result.text, Not(HasSubstr("Paris")));
  EXPECT_THAT(result.text, HasSubstr("capital of France is"));
}

TEST_F(ServingTest, SixteenConcurrentRequestsEqualSixteenSequentialOnes) {
  const std::vector<std::string> topics = {
      "the sea", "a red bicycle", "mountains in winter", "bread", "the moon", "an old clock",
      "rain on a roof", "a library", "the first snow", "a cat named Tom", "coffee", "trains",
      "a lighthouse", "autumn leaves", "the desert at night", "a violin"};
  std::vector<v1::GenerateRequest> requests;
  for (size_t i = 0; i < topics.size(); ++i) {
    const std::string prompt = absl::StrCat("Write ", i % 3 + 1, " sentences about ", topics[i],
                                            ". Be vivid and precise.");
    v1::GenerateRequest request = GreedyText(prompt, 8 + 5 * static_cast<int>(i % 6));
    request.set_ignore_eos(true);
    requests.push_back(request);
  }
  auto stub = serving_->NewStub();
  std::vector<std::vector<int32_t>> sequential;
  uint64_t total_tokens = 0;
  const uint64_t steps_before = serving_->Stats().steps();
  for (const v1::GenerateRequest& request : requests) {
    StreamResult result = RunGenerate(*stub, request);
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    ASSERT_EQ(static_cast<int>(result.token_ids.size()), request.max_tokens());
    sequential.push_back(result.token_ids);
    total_tokens += request.max_tokens();
  }
  const uint64_t steps_sequential = serving_->Stats().steps() - steps_before;
  std::vector<std::future<StreamResult>> futures;
  for (const v1::GenerateRequest& request : requests) {
    futures.push_back(std::async(std::launch::async, [&, request] {
      auto own_stub = serving_->NewStub();
      return RunGenerate(*own_stub, request);
    }));
  }
  for (size_t i = 0; i < futures.size(); ++i) {
    StreamResult result = futures[i].get();
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    EXPECT_EQ(result.token_ids, sequential[i]) << "request " << i << " changed under concurrency";
  }
  // They were batched: one at a time, each step yields at most one token of one request, so the
  // sequential pass took >= total_tokens steps; batched, steps yield tokens of many requests.
  // A router serialising the requests would need as many steps again.
  const uint64_t steps_concurrent =
      serving_->Stats().steps() - steps_before - steps_sequential;
  std::printf("%llu tokens: %llu steps one at a time, %llu steps concurrently\n",
              static_cast<unsigned long long>(total_tokens),
              static_cast<unsigned long long>(steps_sequential),
              static_cast<unsigned long long>(steps_concurrent));
  EXPECT_GE(steps_sequential, total_tokens);
  EXPECT_LT(steps_concurrent, total_tokens / 2) << "the concurrent requests were not batched";
  ExpectEverythingReleased(*serving_);
}

TEST_F(ServingTest, CancelMidStreamFreesBlocksAndWorkerSlot) {
  auto stub = serving_->NewStub();
  v1::GenerateRequest request = GreedyText("Count from one to one thousand:", 400);
  request.set_ignore_eos(true);
  StreamResult result = RunGenerate(
      *stub, request, [](const v1::GenerateResponse& response, grpc::ClientContext& context) {
        static int seen = 0;
        if (++seen == 5) context.TryCancel();
      });
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(result.token_ids.size(), 400u);
  ExpectEverythingReleased(*serving_);
}

// A guided request's grammar is compiled by the worker before the request reaches the engine
// (router/grammar_preparer.h). A client that gives up while its ~30 KB schema is compiling gets
// its deadline, a second request with the same schema (the compile cache) is served, and then
// nothing is held: no request running or waiting, no KV block, no worker slot.
TEST_F(ServingTest, ACancelWhileTheGrammarCompilesReleasesEverything) {
  std::string schema = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 1000; ++i) {
    absl::StrAppend(&schema, i > 0 ? ", " : "", "\"f", i, "\": {\"type\": \"",
                    i % 2 == 0 ? "integer" : "boolean", "\"}");
  }
  absl::StrAppend(&schema, R"(}, "required": ["f0"]})");
  auto stub = serving_->NewStub();
  v1::GenerateRequest request = GreedyText("Give me JSON:", 200);
  request.set_ignore_eos(true);
  request.mutable_structured()->set_json_schema(schema);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
        stub->Generate(&context, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  request.set_max_tokens(1);
  const StreamResult second = RunGenerate(*stub, request);
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  const v1::ServerStatsResponse stats = serving_->Stats();
  EXPECT_EQ(stats.requests_running(), 0);
  EXPECT_EQ(stats.requests_waiting(), 0);
  ExpectEverythingReleased(*serving_);
}

struct BadInput {
  std::string name;
  std::function<void(v1::GenerateRequest&)> mutate;
  grpc::StatusCode code;
  std::string message_part;
};

TEST_F(ServingTest, BadInputGetsAStatusAndAMessage) {
  const std::vector<BadInput> cases = {
      {"no prompt", [](v1::GenerateRequest& r) { r.clear_text(); },
       grpc::StatusCode::INVALID_ARGUMENT, "prompt"},
      {"empty text", [](v1::GenerateRequest& r) { r.set_text(""); },
       grpc::StatusCode::INVALID_ARGUMENT, "text is empty"},
      {"empty token ids", [](v1::GenerateRequest& r) { r.mutable_token_ids(); },
       grpc::StatusCode::INVALID_ARGUMENT, "token_ids"},
      {"token id outside vocabulary",
       [](v1::GenerateRequest& r) { r.mutable_token_ids()->add_ids(1 << 20); },
       grpc::StatusCode::INVALID_ARGUMENT, "token_ids.ids[0]"},
      {"negative temperature",
       [](v1::GenerateRequest& r) { r.mutable_sampling()->set_temperature(-1); },
       grpc::StatusCode::INVALID_ARGUMENT, "temperature"},
      {"top_p above 1", [](v1::GenerateRequest& r) { r.mutable_sampling()->set_top_p(1.5); },
       grpc::StatusCode::INVALID_ARGUMENT, "top_p"},
      {"too many top logprobs", [](v1::GenerateRequest& r) { r.set_top_logprobs(500); },
       grpc::StatusCode::INVALID_ARGUMENT, "top_logprobs"},
      {"max_tokens zero", [](v1::GenerateRequest& r) { r.set_max_tokens(0); },
       grpc::StatusCode::INVALID_ARGUMENT, "max_tokens"},
      {"beyond the context", [](v1::GenerateRequest& r) { r.set_max_tokens(1 << 24); },
       grpc::StatusCode::INVALID_ARGUMENT, "context"},
      {"unknown stop id", [](v1::GenerateRequest& r) { r.add_stop_token_ids(1 << 20); },
       grpc::StatusCode::INVALID_ARGUMENT, "stop_token_ids"},
      {"empty stop string", [](v1::GenerateRequest& r) { r.add_stop(""); },
       grpc::StatusCode::INVALID_ARGUMENT, "stop[0]"},
      {"too many stop strings",
       [](v1::GenerateRequest& r) {
         for (int i = 0; i < 17; ++i) r.add_stop(absl::StrCat("s", i));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "at most 16"},
      {"chat without messages", [](v1::GenerateRequest& r) { r.mutable_chat(); },
       grpc::StatusCode::INVALID_ARGUMENT, "chat.messages"},
      {"chat with an unknown role",
       [](v1::GenerateRequest& r) {
         v1::ChatMessage* m = r.mutable_chat()->add_messages();
         m->set_role("wizard");
         m->set_content("hi");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "chat."},
  };
  auto stub = serving_->NewStub();
  for (const BadInput& bad : cases) {
    v1::GenerateRequest request = GreedyText("Hello", 4);
    bad.mutate(request);
    StreamResult result = RunGenerate(*stub, request);
    EXPECT_EQ(result.status.error_code(), bad.code) << bad.name;
    EXPECT_THAT(result.status.error_message(), HasSubstr(bad.message_part)) << bad.name;
    EXPECT_TRUE(result.token_ids.empty()) << bad.name;
  }
  // Nothing was lost: the server still answers.
  StreamResult ok = RunGenerate(*stub, GreedyText("Hello", 4));
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
}

TEST_F(ServingTest, TokenizeDetokenizeAndModelInfo) {
  auto stub = serving_->NewStub();
  grpc::ClientContext info_context;
  v1::ModelInfoResponse info;
  ASSERT_TRUE(stub->ModelInfo(&info_context, v1::ModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.vocab_size(), 49152);
  EXPECT_EQ(info.architecture(), "llama");
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_GT(info.num_kv_blocks(), 1);

  grpc::ClientContext tokenize_context;
  v1::TokenizeRequest tokenize;
  tokenize.set_text("Hello world");
  v1::TokenizeResponse ids;
  ASSERT_TRUE(stub->Tokenize(&tokenize_context, tokenize, &ids).ok());
  ASSERT_FALSE(ids.token_ids().empty());
  grpc::ClientContext detokenize_context;
  v1::DetokenizeRequest detokenize;
  *detokenize.mutable_token_ids() = ids.token_ids();
  v1::DetokenizeResponse text;
  ASSERT_TRUE(stub->Detokenize(&detokenize_context, detokenize, &text).ok());
  EXPECT_EQ(text.text(), "Hello world");
}

// Kills the worker mid-stream: the stream ends with UNAVAILABLE; a worker restarted on the same
// port is found again and serves. Runs last in this suite (it restarts the worker).
TEST_F(ServingTest, ZzWorkerLostEndsStreamsWithUnavailableAndRecovers) {
  auto stub = serving_->NewStub();
  v1::GenerateRequest request = GreedyText("Count from one to one thousand:", 400);
  request.set_ignore_eos(true);
  StreamResult result = RunGenerate(
      *stub, request, [](const v1::GenerateResponse& response, grpc::ClientContext& context) {
        static int seen = 0;
        if (++seen == 3) serving_->KillWorker();
      });
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << result.status.error_message();
  EXPECT_THAT(result.status.error_message(), HasSubstr("worker"));
  EXPECT_EQ(result.last.finish_reason(), v1::FINISH_REASON_ERROR);

  // While no worker is there, new requests fail fast with UNAVAILABLE.
  StreamResult refused = RunGenerate(*stub, GreedyText("Hello", 4));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);

  ASSERT_TRUE(serving_->StartWorker({"--threads", "2"}, serving_->worker_port()).ok());
  ASSERT_TRUE(serving_->WaitConnected().ok());
  StreamResult again = RunGenerate(*stub, ChatRequest("What is the capital of France?", 32));
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_THAT(again.text, HasSubstr("Paris"));
  ExpectEverythingReleased(*serving_);
}

// A separate pair with a tiny queue: overflow gets RESOURCE_EXHAUSTED; after the streams end,
// SIGTERM exits cleanly (exit 0).
TEST(ServingAdmissionTest, FullQueueIsResourceExhaustedAndSigtermExitsCleanly) {
  ServingProcesses serving;
  ASSERT_TRUE(
      serving.Start({"--threads", "2"}, {"--max-num-seqs", "1", "--max-waiting", "1"}).ok());
  std::vector<std::future<StreamResult>> futures;
  for (int i = 0; i < 6; ++i) {
    futures.push_back(std::async(std::launch::async, [&] {
      auto stub = serving.NewStub();
      v1::GenerateRequest request = GreedyText("Tell me a long story.", 24);
      request.set_ignore_eos(true);
      return RunGenerate(*stub, request);
    }));
  }
  int ok = 0, exhausted = 0;
  for (auto& future : futures) {
    StreamResult result = future.get();
    if (result.status.ok()) ++ok;
    if (result.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted;
      EXPECT_THAT(result.status.error_message(), HasSubstr("queue"));
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(exhausted, 1);
  EXPECT_EQ(ok + exhausted, 6);
  EXPECT_EQ(serving.StopRouter(), 0);
  // The operational log (router_log.h): the refusals (rate-limited, so at least one line) and
  // the drain that SIGTERM started and finished.
  const std::string log = serving.RouterStderrTail();
  EXPECT_THAT(log, HasSubstr("level=warning component=tessera-router event=request_rejected "
                             "code=RESOURCE_EXHAUSTED"));
  EXPECT_THAT(log, HasSubstr("level=info component=tessera-router event=drain_begin "));
  EXPECT_THAT(log, HasSubstr("level=info component=tessera-router event=drain_end"));
}

}  // namespace
}  // namespace tessera::e2e
