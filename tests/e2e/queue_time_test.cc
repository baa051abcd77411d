// --max-queue-time (issue 15, item 3): a request that cannot be scheduled within the limit fails
// with RESOURCE_EXHAUSTED naming the flag, while the running request is unaffected. Client
// deadlines: a request whose gRPC deadline passes, waiting or running, ends with
// DEADLINE_EXCEEDED and its KV blocks and slot are freed, while the others go on.
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;
using ::testing::HasSubstr;

v1::GenerateRequest Request(int max_tokens) {
  v1::GenerateRequest request;
  request.set_text("Once upon a time");
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  return request;
}

TEST(QueueTimeTest, WaitingPastTheLimitFails) {
  ServingProcesses serving;
  // One sequence at a time: the second request can only wait.
  ASSERT_TRUE(
      serving.Start({"--threads", "2"}, {"--max-num-seqs", "1", "--max-queue-time", "1"}).ok());
  auto stub = serving.NewStub();
  std::future<StreamResult> long_one =
      std::async(std::launch::async, [&] { return RunGenerate(*stub, Request(400)); });
  for (int i = 0; i < 100 && serving.Stats().requests_running() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(serving.Stats().requests_running(), 1);

  const auto start = std::chrono::steady_clock::now();
  const StreamResult queued = RunGenerate(*stub, Request(4));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(queued.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << queued.status.error_message();
  EXPECT_THAT(queued.status.error_message(), HasSubstr("--max-queue-time"));
  EXPECT_GE(waited, 0.9);
  EXPECT_LT(waited, 10.0);

  const StreamResult finished = long_one.get();
  EXPECT_TRUE(finished.status.ok()) << finished.status.error_message();
  EXPECT_EQ(finished.token_ids.size(), 400u);
  ExpectEverythingReleased(serving);
}

// Runs `request` with a client deadline `seconds` from now; the status and the tokens it got.
StreamResult RunWithDeadline(v1::Tessera::Stub& stub, const v1::GenerateRequest& request,
                             double seconds) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  auto reader = stub.Generate(&context, request);
  StreamResult result;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    result.token_ids.insert(result.token_ids.end(), response.token_ids().begin(),
                            response.token_ids().end());
  }
  result.status = reader->Finish();
  return result;
}

TEST(QueueTimeTest, ClientDeadlinesEndWaitingAndRunningRequestsAndFreeTheirKv) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.Start({"--threads", "2"}, {"--max-num-seqs", "1"}).ok());
  auto stub = serving.NewStub();
  // Running: 4000 tokens cannot finish in 2 s on any machine this runs on (the CPU backend makes
  // a few hundred tokens a second at most with this model).
  std::future<StreamResult> running =
      std::async(std::launch::async, [&] { return RunWithDeadline(*stub, Request(4000), 2.0); });
  for (int i = 0; i < 100 && serving.Stats().requests_running() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(serving.Stats().requests_running(), 1);
  EXPECT_GT(serving.Stats().kv_blocks_used(), 0);
  // Waiting behind it (one sequence at a time), with a shorter deadline.
  const StreamResult waiting = RunWithDeadline(*stub, Request(4), 0.5);
  EXPECT_EQ(waiting.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(waiting.token_ids.empty());

  const StreamResult ran = running.get();
  EXPECT_EQ(ran.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GT(ran.token_ids.size(), 0u);
  EXPECT_LT(ran.token_ids.size(), 4000u);
  ExpectEverythingReleased(serving);
  // The server is fine afterwards.
  const StreamResult after = RunGenerate(*stub, Request(4));
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.token_ids.size(), 4u);
}

}  // namespace
}  // namespace tessera::e2e
