// Bucket helpers: strictly increasing, the documented ranges, short exact boundaries.
#include "common/metrics/buckets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::metrics {
namespace {

using ::testing::ElementsAre;

bool StrictlyIncreasing(const std::vector<double>& buckets) {
  for (size_t i = 1; i < buckets.size(); ++i) {
    if (!(buckets[i - 1] < buckets[i])) return false;
  }
  return !buckets.empty();
}

TEST(BucketsTest, RequestLatencySpansMillisecondsToTenMinutes) {
  const std::vector<double> b = RequestLatencyBuckets();
  EXPECT_TRUE(StrictlyIncreasing(b));
  EXPECT_EQ(b.front(), 0.001);
  EXPECT_EQ(b.back(), 600);
  EXPECT_THAT(b, ::testing::Contains(0.0025));  // exact, so the `le` label prints short
  EXPECT_THAT(b, ::testing::Contains(1.0));
  EXPECT_THAT(b, ::testing::Contains(60.0));
  EXPECT_LE(b.size(), 25u) << "each bucket is a series per scrape";
}

TEST(BucketsTest, StepLatencySpansMicrosecondsToAMinute) {
  const std::vector<double> b = StepLatencyBuckets();
  EXPECT_TRUE(StrictlyIncreasing(b));
  EXPECT_EQ(b.front(), 0.00001);
  EXPECT_EQ(b.back(), 60);
  EXPECT_THAT(b, ::testing::Contains(0.00025));
  EXPECT_LE(b.size(), 25u);
}

TEST(BucketsTest, CountBucketsArePowersOfTwoUpToTheLimit) {
  EXPECT_THAT(CountBuckets(1), ElementsAre(1));
  EXPECT_THAT(CountBuckets(8), ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(CountBuckets(100), ElementsAre(1, 2, 4, 8, 16, 32, 64, 100));
  const std::vector<double> b = CountBuckets(2048);
  EXPECT_EQ(b.size(), 12u);
  EXPECT_EQ(b.back(), 2048);
  EXPECT_TRUE(StrictlyIncreasing(b));
}

TEST(BucketsTest, ExponentialBuckets) {
  EXPECT_THAT(ExponentialBuckets(1, 2, 4), ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(ExponentialBuckets(0.5, 10, 2), ElementsAre(0.5, 5));
}

TEST(BucketsDeathTest, BadArgumentsAbort) {
  EXPECT_DEATH(CountBuckets(0), "max_count");
  EXPECT_DEATH(ExponentialBuckets(1, 1, 3), "factor");
}

}  // namespace
}  // namespace tessera::metrics
