// The margin rule of greedy_comparison.h on hand-made runs: equal runs pass, a swap is allowed
// only at a near tie and ends the comparison, logprobs are compared at every compared position,
// and a missing top-2 or a length difference before any divergence fails.
#include "tests/testing/greedy_comparison.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace tessera::testing_util {
namespace {

using ::testing::HasSubstr;

constexpr GreedyTolerance kTolerance{.logprob = 0.01f, .margin = 0.02f};

// A reference position choosing `token` with logprob -1 over `second` at -1 - margin.
GreedyToken Ref(int32_t token, float margin, int32_t second = 99) {
  return {.token_id = token, .logprob = -1.0f, .top = {{token, -1.0f}, {second, -1.0f - margin}}};
}
GreedyToken Got(int32_t token, float logprob = -1.0f) {
  return {.token_id = token, .logprob = logprob};
}

TEST(CompareGreedyRuns, EqualRunsAgreeAtEveryPosition) {
  const std::vector<GreedyToken> reference = {Ref(5, 1.0f), Ref(6, 0.5f), Ref(7, 2.0f)};
  const std::vector<GreedyToken> candidate = {Got(5), Got(6, -1.005f), Got(7)};
  const GreedyComparison result = CompareGreedyRuns(reference, candidate, kTolerance);
  EXPECT_EQ(result.mismatch, "");
  EXPECT_EQ(result.compared, 3);
  EXPECT_EQ(result.diverged_at, -1);
  EXPECT_NEAR(result.max_logprob_diff, 0.005f, 1e-6f);
  EXPECT_FLOAT_EQ(result.min_margin, 0.5f);
}

TEST(CompareGreedyRuns, ADifferentTokenWhereTheMarginIsWideFails) {
  const std::vector<GreedyToken> reference = {Ref(5, 1.0f), Ref(6, 0.5f)};
  const std::vector<GreedyToken> candidate = {Got(5), Got(99)};
  const GreedyComparison result = CompareGreedyRuns(reference, candidate, kTolerance);
  EXPECT_THAT(result.mismatch, HasSubstr("position 1: token 99 instead of 6"));
  EXPECT_THAT(result.mismatch, HasSubstr("margin is 0.5 > 0.02"));
}

TEST(CompareGreedyRuns, ASwapAtANearTieEndsTheComparison) {
  const std::vector<GreedyToken> reference = {Ref(5, 1.0f), Ref(6, 0.01f, 8), Ref(7, 3.0f)};
  // After the swap the runs continue from different prefixes: position 2 is not read.
  const std::vector<GreedyToken> candidate = {Got(5), Got(8, -1.01f), Got(1234)};
  const GreedyComparison result = CompareGreedyRuns(reference, candidate, kTolerance);
  EXPECT_EQ(result.mismatch, "");
  EXPECT_EQ(result.diverged_at, 1);
  EXPECT_EQ(result.compared, 2);
}

TEST(CompareGreedyRuns, ASwapToATokenTheReferenceDoesNotRankNearTheTopFails) {
  const std::vector<GreedyToken> reference = {Ref(6, 0.01f, 8)};
  EXPECT_THAT(CompareGreedyRuns(reference, std::vector<GreedyToken>{Got(9)}, kTolerance).mismatch,
              HasSubstr("which the reference does not rank within 0.02 of its top-1"));
  // The swapped-to token's logprob is compared too.
  EXPECT_THAT(
      CompareGreedyRuns(reference, std::vector<GreedyToken>{Got(8, -0.5f)}, kTolerance).mismatch,
      HasSubstr("token 8 has logprob -0.5"));
}

TEST(CompareGreedyRuns, ALogprobOutsideTheToleranceFailsEvenWithEqualTokens) {
  const std::vector<GreedyToken> reference = {Ref(5, 1.0f), Ref(6, 1.0f)};
  const GreedyComparison result =
      CompareGreedyRuns(reference, std::vector<GreedyToken>{Got(5), Got(6, -1.02f)}, kTolerance);
  EXPECT_THAT(result.mismatch, HasSubstr("position 1: token 6 has logprob -1.02"));
}

TEST(CompareGreedyRuns, MissingTopLogprobsOrADifferentLengthFail) {
  const std::vector<GreedyToken> no_top = {{.token_id = 5, .logprob = -1.0f}};
  EXPECT_THAT(CompareGreedyRuns(no_top, std::vector<GreedyToken>{Got(5)}, kTolerance).mismatch,
              HasSubstr("no top-2 logprobs"));
  const std::vector<GreedyToken> reference = {Ref(5, 1.0f), Ref(6, 1.0f)};
  EXPECT_THAT(CompareGreedyRuns(reference, std::vector<GreedyToken>{Got(5)}, kTolerance).mismatch,
              HasSubstr("the reference has 2 tokens, the candidate 1"));
}

}  // namespace
}  // namespace tessera::testing_util
