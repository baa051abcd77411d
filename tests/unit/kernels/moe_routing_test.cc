// MoE routing (kernels/cpu/moe_routing.h): top-k selection and renormalisation exactly as the
// reference, ties to the lower index, the f32 softmax routing against an f64 one, and the
// grouping by expert (a stable counting sort and its inverse).
#include "kernels/cpu/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/moe_reference.h"
#include "kernels/cpu/softmax.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::RandomVector;

struct ExpertCount {
  int num_experts;
  int k;
};

// Awkward expert counts, k = 1, k = num_experts and in between.
const ExpertCount kExpertCounts[] = {{4, 1}, {4, 2},  {4, 4},  {8, 1},  {8, 2},
                                     {8, 8}, {10, 2}, {10, 8}, {64, 8}, {10, 10}};

// Given the same f32 probabilities, the kernel's selection and weights are bit-identical to the
// reference's (same rule, written independently: insertion vs stable sort).
TEST(CpuMoeRoutingTest, SelectTopExpertsMatchesReferenceExactly) {
  uint64_t seed = 1;
  for (const ExpertCount& c : kExpertCounts) {
    for (bool normalize : {true, false}) {
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<float> probs = RandomVector(c.num_experts, ++seed, -4.0f, 4.0f);
        SoftmaxInPlace(probs);
        std::vector<int32_t> ids(c.k), ref_ids;
        std::vector<float> weights(c.k), ref_weights;
        SelectTopExperts(probs, c.k, normalize, ids, weights);
        reference::MoeSelectTopK(probs, c.k, normalize, &ref_ids, &ref_weights);
        ASSERT_EQ(ids, ref_ids) << "E=" << c.num_experts << " k=" << c.k << " trial " << trial;
        ASSERT_TRUE(BitEqual(weights, ref_weights)) << "E=" << c.num_experts << " k=" << c.k;
      }
    }
  }
}

TEST(CpuMoeRoutingTest, TiesGoToTheLowerIndex) {
  const std::vector<float> probs = {0.1f, 0.3f, 0.3f, 0.0f, 0.3f};
  const std::vector<std::vector<int32_t>> expected = {
      {1}, {1, 2}, {1, 2, 4}, {1, 2, 4, 0}, {1, 2, 4, 0, 3}};
  for (int k = 1; k <= 5; ++k) {
    std::vector<int32_t> ids(k), ref_ids;
    std::vector<float> weights(k), ref_weights;
    SelectTopExperts(probs, k, true, ids, weights);
    reference::MoeSelectTopK(probs, k, true, &ref_ids, &ref_weights);
    EXPECT_EQ(ids, expected[k - 1]) << "k=" << k;
    EXPECT_EQ(ref_ids, expected[k - 1]) << "k=" << k;
    EXPECT_TRUE(BitEqual(weights, ref_weights)) << "k=" << k;
  }
}

// Equal logits: experts 0..k-1, each weight exactly 1/k (k copies of one f32 sum exactly in f64).
TEST(CpuMoeRoutingTest, EqualLogitsRouteToTheFirstKExperts) {
  for (Isa isa : SupportedIsas()) {
    for (const ExpertCount& c : kExpertCounts) {
      const int64_t num_tokens = 3;
      std::vector<float> logits(num_tokens * c.num_experts, 0.75f);
      std::vector<int32_t> ids(num_tokens * c.k);
      std::vector<float> weights(num_tokens * c.k);
      RouteTokens({c.num_experts, c.k, true}, logits, num_tokens, ids, weights, isa);
      for (int64_t t = 0; t < num_tokens; ++t) {
        for (int r = 0; r < c.k; ++r) {
          EXPECT_EQ(ids[t * c.k + r], r) << IsaName(isa) << " E=" << c.num_experts;
          EXPECT_EQ(weights[t * c.k + r], static_cast<float>(1.0 / c.k));
        }
      }
    }
  }
}

TEST(CpuMoeRoutingTest, NanRanksBelowEveryNumber) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> probs = {nan, 0.2f, nan, 0.5f};
  std::vector<int32_t> ids(4);
  std::vector<float> weights(4);
  SelectTopExperts(probs, 2, false, ids, weights);
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids[1], 1);
  SelectTopExperts(probs, 4, false, ids, weights);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 1, 0, 2}));
}

class CpuMoeRoutingIsaTest : public ::testing::TestWithParam<Isa> {};

// The f32 routing (polynomial exp, SIMD sums) against f64 softmax: the same experts in the same
// order (random logits have no near-ties at this scale), weights within 1e-6 (a few f32 ulps of
// a value <= 1: exp ≈ 2 ulp, the sum, the reciprocal and the renormalisation).
TEST_P(CpuMoeRoutingIsaTest, RouteTokensMatchesF64Reference) {
  uint64_t seed = 100;
  const int64_t num_tokens = 17;
  for (const ExpertCount& c : kExpertCounts) {
    for (bool normalize : {true, false}) {
      std::vector<float> logits = RandomVector(num_tokens * c.num_experts, ++seed, -4.0f, 4.0f);
      const std::vector<float> original = logits;
      std::vector<int32_t> ids(num_tokens * c.k);
      std::vector<float> weights(num_tokens * c.k);
      RouteTokens({c.num_experts, c.k, normalize}, logits, num_tokens, ids, weights, GetParam());
      for (int64_t t = 0; t < num_tokens; ++t) {
        const std::vector<double> row(original.begin() + t * c.num_experts,
                                      original.begin() + (t + 1) * c.num_experts);
        const reference::MoeTokenRoute ref = reference::MoeRoute(row, c.k, normalize);
        for (int r = 0; r < c.k; ++r) {
          ASSERT_EQ(ids[t * c.k + r], ref.ids[r]) << "E=" << c.num_experts << " t=" << t;
          ASSERT_NEAR(weights[t * c.k + r], ref.weights[r], 1e-6) << "E=" << c.num_experts;
        }
      }
    }
  }
}

// A token's routing does not depend on the other tokens routed with it.
TEST_P(CpuMoeRoutingIsaTest, RoutingIsPerToken) {
  const MoeRoutingConfig config{10, 3, true};
  const std::vector<float> batch = RandomVector(17 * 10, 7, -3.0f, 3.0f);
  std::vector<float> logits = batch;
  std::vector<int32_t> ids(17 * 3);
  std::vector<float> weights(17 * 3);
  RouteTokens(config, logits, 17, ids, weights, GetParam());
  for (int64_t t = 0; t < 17; ++t) {
    std::vector<float> alone(batch.begin() + t * 10, batch.begin() + (t + 1) * 10);
    std::vector<int32_t> alone_ids(3);
    std::vector<float> alone_weights(3);
    RouteTokens(config, alone, 1, alone_ids, alone_weights, GetParam());
    EXPECT_TRUE(std::equal(alone_ids.begin(), alone_ids.end(), ids.begin() + t * 3));
    EXPECT_EQ(std::memcmp(alone_weights.data(), weights.data() + t * 3, 3 * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(CpuIsas, CpuMoeRoutingIsaTest, ::testing::ValuesIn(SupportedIsas()),
                         testing::IsaParamName);

TEST(CpuMoeGroupingTest, HandWorkedExample) {
  // 4 tokens, k = 2, 5 experts; expert 2 gets no token.
  const std::vector<int32_t> ids = {3, 1, 1, 4, 3, 0, 4, 1};
  ExpertGroups groups;
  GroupByExpert(ids, 4, 2, 5, &groups);
  EXPECT_EQ(groups.offsets, (std::vector<int32_t>{0, 1, 4, 4, 6, 8}));
  EXPECT_EQ(groups.row_tokens, (std::vector<int32_t>{2, 0, 1, 3, 0, 2, 1, 3}));
  EXPECT_EQ(groups.slot_rows, (std::vector<int32_t>{4, 1, 2, 6, 5, 0, 7, 3}));
}

// On random routings: each group lists exactly its expert's tokens in increasing order, and
// slot_rows inverts the permutation; reusing the struct for a smaller routing leaves no stale
// state; zero tokens give empty groups.
TEST(CpuMoeGroupingTest, RandomRoutingsGroupConsistently) {
  ExpertGroups groups;  // reused across cases, as a workspace is
  uint64_t seed = 300;
  for (const ExpertCount& c : kExpertCounts) {
    for (int64_t num_tokens : {97, 17, 3, 1, 0}) {
      std::vector<float> logits = RandomVector(num_tokens * c.num_experts, ++seed, -3.0f, 3.0f);
      std::vector<int32_t> ids(num_tokens * c.k);
      std::vector<float> weights(num_tokens * c.k);
      RouteTokens({c.num_experts, c.k, true}, logits, num_tokens, ids, weights);
      GroupByExpert(ids, num_tokens, c.k, c.num_experts, &groups);
      ASSERT_EQ(groups.offsets.size(), static_cast<size_t>(c.num_experts + 1));
      ASSERT_EQ(groups.offsets.front(), 0);
      ASSERT_EQ(groups.offsets.back(), num_tokens * c.k);
      std::vector<int> seen(num_tokens * c.k, 0);
      for (int64_t s = 0; s < num_tokens * c.k; ++s) {
        const int32_t row = groups.slot_rows[s];
        ASSERT_GE(row, groups.offsets[ids[s]]);
        ASSERT_LT(row, groups.offsets[ids[s] + 1]);
        ASSERT_EQ(groups.row_tokens[row], s / c.k);
        ++seen[row];
      }
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
      for (int e = 0; e < c.num_experts; ++e) {
        for (int32_t row = groups.offsets[e] + 1; row < groups.offsets[e + 1]; ++row) {
          ASSERT_LT(groups.row_tokens[row - 1], groups.row_tokens[row]) << "expert " << e;
        }
      }
    }
  }
}

TEST(CpuMoeRoutingDeathTest, RejectsBadArguments) {
  std::vector<float> logits(8, 0.0f);
  std::vector<int32_t> ids(8);
  std::vector<float> weights(8);
  EXPECT_DEATH(RouteTokens({4, 5, true}, logits, 1, ids, weights), "num_experts_used");
  EXPECT_DEATH(RouteTokens({4, 0, true}, logits, 1, ids, weights), "num_experts_used");
  const std::vector<int32_t> bad = {0, 4};
  ExpertGroups groups;
  EXPECT_DEATH(GroupByExpert(bad, 1, 2, 4, &groups), "expert id out of range");
}

}  // namespace
}  // namespace tessera::kernels::cpu
