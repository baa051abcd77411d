// End-to-end KV-pool pressure: a worker with a deliberately small pool (--num-kv-blocks) behind a
// router that admits many sequences. Eight concurrent greedy requests overflow the pool, so the
// scheduler preempts and recomputes (through the prefix cache); every request still finishes
// with exactly the tokens it gets alone on an unconstrained pair, and afterwards nothing is
// held. A request that cannot fit in the pool even alone is rejected up front.
#include <chrono>
#include <cstdint>
#include <future>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;
using ::testing::HasSubstr;

// 20 usable blocks of 16 tokens (block 0 is the null block) = 320 positions.
constexpr int kNumKvBlocks = 21;
constexpr int kNumRequests = 8;
constexpr int kMaxTokens = 64;

// Request i: a 48-token prefix every request shares, then 42 tokens of its own (90 tokens, 6
// blocks; 154 positions = 10 blocks by the end). Three fit at admission, two to the end.
v1::GenerateRequest PressureRequest(int i) {
  std::mt19937 shared(7), own(100 + static_cast<uint32_t>(i));
  v1::GenerateRequest request;
  for (int t = 0; t < 48; ++t) request.mutable_token_ids()->add_ids(1000 + shared() % 20000);
  for (int t = 0; t < 42; ++t) request.mutable_token_ids()->add_ids(1000 + own() % 20000);
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(kMaxTokens);
  request.set_ignore_eos(true);
  return request;
}

TEST(KvPressureTest, PreemptedRequestsFinishWithUnchangedOutput) {
  // Reference: each request alone on a roomy pool.
  std::vector<std::vector<int32_t>> alone;
  {
    ServingProcesses roomy;
    ASSERT_TRUE(roomy.Start({"--threads", "2"}).ok());
    auto stub = roomy.NewStub();
    for (int i = 0; i < kNumRequests; ++i) {
      StreamResult result = RunGenerate(*stub, PressureRequest(i));
      ASSERT_TRUE(result.status.ok()) << result.status.error_message();
      ASSERT_EQ(static_cast<int>(result.token_ids.size()), kMaxTokens);
      alone.push_back(result.token_ids);
    }
    EXPECT_EQ(roomy.Stats().preemptions(), 0u);
  }

  ServingProcesses tight;
  ASSERT_TRUE(tight
                  .Start({"--threads", "2", "--num-kv-blocks", std::to_string(kNumKvBlocks)},
                         {"--max-num-seqs", "64"})
                  .ok());
  ASSERT_EQ(tight.Stats().kv_blocks_total(), kNumKvBlocks - 1);
  std::vector<std::future<StreamResult>> futures;
  for (int i = 0; i < kNumRequests; ++i) {
    futures.push_back(std::async(std::launch::async, [&tight, i] {
      auto stub = tight.NewStub();
      return RunGenerate(*stub, PressureRequest(i));
    }));
  }
  for (int i = 0; i < kNumRequests; ++i) {
    StreamResult result = futures[static_cast<size_t>(i)].get();
    ASSERT_TRUE(result.status.ok()) << "request " << i << ": " << result.status.error_message();
    EXPECT_EQ(result.last.finish_reason(), v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(result.token_ids, alone[static_cast<size_t>(i)])
        << "request " << i << " changed under preemption";
  }
  const v1::ServerStatsResponse stats = tight.Stats();
  EXPECT_GT(stats.preemptions(), 0u);
  std::cout << "preemptions " << stats.preemptions() << ", prefix cache hits "
            << stats.prefix_cache_hit_tokens() << " of " << stats.prefix_cache_query_tokens()
            << " tokens looked up\n";
  ExpectEverythingReleased(tight);
  EXPECT_EQ(tight.Stats().kv_blocks_used(), 0);
  EXPECT_EQ(tight.Stats().worker_active_slots(), 0);

  // 100 + 300 - 1 positions need 25 blocks: more than the whole pool, so no amount of waiting
  // or preempting could run it. Rejected at once, saying why.
  auto stub = tight.NewStub();
  v1::GenerateRequest too_big = PressureRequest(0);
  for (int t = 0; t < 10; ++t) too_big.mutable_token_ids()->add_ids(2000 + t);
  too_big.set_max_tokens(300);
  StreamResult rejected = RunGenerate(*stub, too_big);
  EXPECT_EQ(rejected.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rejected.status.error_message(), HasSubstr("needs 25 KV blocks"));
  EXPECT_THAT(rejected.status.error_message(),
              HasSubstr("the worker's KV pool holds only 20 blocks"));
  EXPECT_TRUE(rejected.token_ids.empty());
  // The server is fine afterwards.
  StreamResult ok = RunGenerate(*stub, PressureRequest(3));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.token_ids, alone[3]);
}

}  // namespace
}  // namespace tessera::e2e
