// --max-queue-time (issue 15, item 3): a request that cannot be scheduled within the limit fails
// with RESOURCE_EXHAUSTED naming the flag, while the running request is unaffected.
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

}  // namespace
}  // namespace tessera::e2e
