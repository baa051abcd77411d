// Backpressure end to end (issue 15, item 1): a Generate stream whose client does not read stops
// being scheduled once its unsent output reaches the router's bound (its KV stays), resumes when
// the client reads, and is cancelled with DEADLINE_EXCEEDED after --stream-stall-timeout.
#include <chrono>
#include <memory>
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

constexpr int kMaxTokens = 1500;

// A client channel that grants the server little HTTP/2 window: no BDP probing, a small
// lookahead, so a client that does not read stops taking data soon.
std::unique_ptr<v1::Tessera::Stub> SlowReaderStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8192);
  return v1::Tessera::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

// Large responses (a 256-byte id, 20 alternatives per token) so the bound is reached quickly.
v1::GenerateRequest LongRequest() {
  v1::GenerateRequest request;
  request.set_request_id(std::string(256, 'r'));
  request.set_text("Once upon a time");
  request.set_max_tokens(kMaxTokens);
  request.set_ignore_eos(true);
  request.set_logprobs(true);
  request.set_top_logprobs(20);
  return request;
}

// Polls ServerStats until one request is running, holds KV, and no step went out for 2 s.
bool WaitPaused(const ServingProcesses& serving, double timeout_s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int(timeout_s * 1000));
  uint64_t last_steps = 0;
  auto last_change = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    const v1::ServerStatsResponse stats = serving.Stats();
    if (stats.requests_running() != 1 || stats.kv_blocks_used() == 0) return false;
    if (stats.steps() != last_steps) {
      last_steps = stats.steps();
      last_change = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_change > std::chrono::seconds(2)) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(BackpressureTest, UnreadStreamPausesAndResumes) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.Start({"--threads", "2"}).ok());
  auto stub = SlowReaderStub(serving.router_address());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(240));
  auto reader = stub->Generate(&context, LongRequest());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(WaitPaused(serving, 120)) << "the request kept generating (or ended) unread";

  // Reading resumes it: every token arrives.
  v1::GenerateResponse response;
  int tokens = 0;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&response)) {
    tokens += response.token_ids_size();
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish = response.finish_reason();
  }
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, kMaxTokens);
  EXPECT_EQ(finish, v1::FINISH_REASON_LENGTH);
  ExpectEverythingReleased(serving);
}

TEST(BackpressureTest, StalledClientIsCancelled) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.Start({"--threads", "2"}, {"--stream-stall-timeout", "1"}).ok());
  auto stub = SlowReaderStub(serving.router_address());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(240));
  auto reader = stub->Generate(&context, LongRequest());
  // Without reading, the router gives up on it: nothing running, its KV back.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  v1::ServerStatsResponse stats;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stats = serving.Stats();
  } while (stats.requests_running() > 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(stats.requests_running(), 0);
  EXPECT_EQ(stats.kv_blocks_used(), 0);

  v1::GenerateResponse response;
  int tokens = 0;
  while (reader->Read(&response)) tokens += response.token_ids_size();
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("--stream-stall-timeout"));
  EXPECT_LT(tokens, kMaxTokens);
}

}  // namespace
}  // namespace tessera::e2e
