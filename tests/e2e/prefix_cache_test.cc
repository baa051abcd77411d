// End-to-end prefix cache: tessera-worker and tessera-router as real processes on loopback, the
// default model. Requests that share a ~1000-token prefix: the later one is served the shared
// whole blocks from the cache (usage.cached_tokens, ServerStats) and computes only its tail,
// with output identical to a cold run (a request in another cache_salt namespace computes
// everything). Also: a full hit still recomputes the last block, blocks filled by generated
// tokens serve a follow-up turn, and --no-prefix-cache turns it all off.
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;

constexpr int kBlockSize = 16;      // the worker's default --block-size
constexpr int kPrefixTokens = 1000;  // shared; 992 of them in whole blocks

// Deterministic "random text" token ids, clear of the special tokens at the bottom of the
// vocabulary.
std::vector<int32_t> RandomIds(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = 1000 + static_cast<int32_t>(rng() % 20000);
  return ids;
}

std::vector<int32_t> Cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

v1::GenerateRequest GreedyIds(const std::vector<int32_t>& ids, int max_tokens,
                              const std::string& salt = "") {
  v1::GenerateRequest request;
  request.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  request.set_cache_salt(salt);
  return request;
}

// Runs one request and returns its result, with the ServerStats prefix-cache deltas it caused.
struct CachedRun {
  StreamResult result;
  uint64_t query_tokens = 0;
  uint64_t hit_tokens = 0;
};

CachedRun Generate(const ServingProcesses& serving, const v1::GenerateRequest& request) {
  const v1::ServerStatsResponse before = serving.Stats();
  auto stub = serving.NewStub();
  CachedRun run{RunGenerate(*stub, request)};
  const v1::ServerStatsResponse after = serving.Stats();
  run.query_tokens = after.prefix_cache_query_tokens() - before.prefix_cache_query_tokens();
  run.hit_tokens = after.prefix_cache_hit_tokens() - before.prefix_cache_hit_tokens();
  EXPECT_TRUE(run.result.status.ok()) << run.result.status.error_message();
  EXPECT_EQ(static_cast<int>(run.result.token_ids.size()), request.max_tokens());
  return run;
}

uint32_t CachedTokens(const CachedRun& run) { return run.result.last.usage().cached_tokens(); }
double Ttft(const CachedRun& run) {
  return run.result.last.timings().time_to_first_token_seconds();
}

class PrefixCacheServingTest : public SharedServingTest {};

// Two requests share a 1000-token prefix and differ in an 8-token tail. The second is served the
// 62 whole shared blocks (992 tokens) and computes only the rest; its tokens equal a cold run's.
// The first one repeated exactly is a full hit: its last block (the last prompt token) is still
// recomputed, so it too gets 992.
TEST_F(PrefixCacheServingTest, SharedPrefixIsServedFromTheCache) {
  const std::vector<int32_t> prefix = RandomIds(kPrefixTokens, 1);
  const v1::GenerateRequest first = GreedyIds(Cat(prefix, RandomIds(8, 2)), 12);
  const std::vector<int32_t> second_prompt = Cat(prefix, RandomIds(8, 3));
  constexpr uint32_t kShared = kPrefixTokens / kBlockSize * kBlockSize;  // 992

  const CachedRun a = Generate(*serving_, first);
  EXPECT_EQ(CachedTokens(a), 0u);
  EXPECT_EQ(a.query_tokens, 1008u);
  EXPECT_EQ(a.hit_tokens, 0u);
  // Cold: the same prompt in its own cache namespace shares nothing with `first`.
  const CachedRun cold = Generate(*serving_, GreedyIds(second_prompt, 12, "cold-namespace"));
  EXPECT_EQ(CachedTokens(cold), 0u);
  EXPECT_EQ(cold.hit_tokens, 0u);

  const CachedRun warm = Generate(*serving_, GreedyIds(second_prompt, 12));
  EXPECT_EQ(CachedTokens(warm), kShared);
  EXPECT_EQ(warm.query_tokens, 1008u);
  EXPECT_EQ(warm.hit_tokens, kShared);  // computed: 1008 - 992 = 16 prompt tokens
  EXPECT_EQ(warm.result.token_ids, cold.result.token_ids) << "a cache hit changed the output";
  EXPECT_LT(Ttft(warm), Ttft(cold));
  std::cout << "TTFT cold " << Ttft(cold) << " s, warm (992 of 1008 cached) " << Ttft(warm)
            << " s\n";

  // 1008 = 63 whole blocks: a full hit, the last block recomputed for the last token's logits.
  const CachedRun again = Generate(*serving_, first);
  EXPECT_EQ(CachedTokens(again), 1008u - kBlockSize);
  EXPECT_EQ(again.result.token_ids, a.result.token_ids);

  // The same salt as `cold`: that namespace has its own copy of the prefix now.
  const CachedRun cold_again = Generate(*serving_, GreedyIds(second_prompt, 12, "cold-namespace"));
  EXPECT_EQ(CachedTokens(cold_again), 1008u - kBlockSize);
  EXPECT_EQ(cold_again.result.token_ids, cold.result.token_ids);
}

// Blocks filled by generated tokens are cached too: a follow-up turn that repeats the prompt and
// the answer is served through the answer's whole blocks.
TEST_F(PrefixCacheServingTest, FollowUpTurnReusesTheGeneratedTokens) {
  const std::vector<int32_t> prompt = RandomIds(kPrefixTokens + 8, 4);  // 1008 = 63 blocks
  const CachedRun turn1 = Generate(*serving_, GreedyIds(prompt, 24));
  // Computed positions: 1008 + 24 - 1 = 1031, so 64 whole blocks (1024 tokens) are cached.
  const std::vector<int32_t> follow_up =
      Cat(Cat(prompt, turn1.result.token_ids), RandomIds(4, 5));  // 1036 tokens
  const CachedRun turn2 = Generate(*serving_, GreedyIds(follow_up, 8));
  EXPECT_EQ(CachedTokens(turn2), 1024u);
  const CachedRun cold = Generate(*serving_, GreedyIds(follow_up, 8, "another-tenant"));
  EXPECT_EQ(CachedTokens(cold), 0u);
  EXPECT_EQ(turn2.result.token_ids, cold.result.token_ids);
}

// --no-prefix-cache: nothing is looked up or shared, output unchanged.
TEST(PrefixCacheOffTest, NoPrefixCacheFlagComputesEverything) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.Start({"--threads", "2"}, {"--no-prefix-cache"}).ok());
  const std::vector<int32_t> prompt = RandomIds(200, 6);
  const CachedRun first = Generate(serving, GreedyIds(prompt, 8));
  const CachedRun second = Generate(serving, GreedyIds(prompt, 8));
  EXPECT_EQ(CachedTokens(second), 0u);
  EXPECT_EQ(second.query_tokens, 0u);
  EXPECT_EQ(serving.Stats().prefix_cache_hit_tokens(), 0u);
  EXPECT_EQ(second.result.token_ids, first.result.token_ids);
}

}  // namespace
}  // namespace tessera::e2e
