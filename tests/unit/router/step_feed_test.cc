// StepFeed (router/console/step_feed.h): records reach every subscriber tagged with their
// worker; a slow subscriber's queue stays bounded, losing its oldest records, counted; the
// subscriber limit holds; watched() follows the subscriptions; concurrent publishers lose
// nothing a subscriber has room for.
#include "router/console/step_feed.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace tessera::router::console {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using std::chrono::milliseconds;

std::string Record(int step) { return "{\"step\":" + std::to_string(step) + "}"; }

TEST(StepFeedTest, NobodyWatchingCostsNothingAndKeepsNothing) {
  StepFeed feed(StepFeedOptions{});
  EXPECT_FALSE(feed.watched());
  feed.Publish(0, Record(1));  // dropped on the floor: no subscriber
  const auto subscription = feed.Subscribe();
  EXPECT_TRUE(feed.watched());
  EXPECT_THAT(subscription->Take(milliseconds(0)), IsEmpty());
}

TEST(StepFeedTest, EverySubscriberGetsEachRecordTaggedWithItsWorker) {
  StepFeed feed(StepFeedOptions{});
  const auto a = feed.Subscribe();
  const auto b = feed.Subscribe();
  feed.Publish(0, Record(7));
  feed.Publish(3, Record(8));
  feed.Publish(1, "{}");
  const std::vector<std::string> want = {"{\"worker\":0,\"step\":7}", "{\"worker\":3,\"step\":8}",
                                         "{\"worker\":1}"};
  EXPECT_EQ(a->Take(milliseconds(0)), want);
  EXPECT_EQ(b->Take(milliseconds(0)), want);
  EXPECT_THAT(a->Take(milliseconds(0)), IsEmpty());  // taken once
}

TEST(StepFeedTest, ASlowSubscriberLosesItsOldestRecordsCounted) {
  prometheus::Registry registry;
  prometheus::Counter& dropped =
      prometheus::BuildCounter().Name("dropped_total").Register(registry).Add({});
  StepFeed feed(StepFeedOptions{.max_subscribers = 2, .queue_records = 3}, &dropped);
  const auto slow = feed.Subscribe();
  const auto fast = feed.Subscribe();
  for (int step = 1; step <= 5; ++step) {
    feed.Publish(0, Record(step));
    if (step == 3) EXPECT_EQ(fast->Take(milliseconds(0)).size(), 3u);
  }
  EXPECT_THAT(slow->Take(milliseconds(0)),
              ElementsAre("{\"worker\":0,\"step\":3}", "{\"worker\":0,\"step\":4}",
                          "{\"worker\":0,\"step\":5}"));
  EXPECT_EQ(slow->dropped(), 2u);
  EXPECT_EQ(fast->Take(milliseconds(0)).size(), 2u);
  EXPECT_EQ(fast->dropped(), 0u);
  EXPECT_EQ(dropped.Value(), 2);
}

TEST(StepFeedTest, SubscribersBeyondTheLimitAreRefusedUntilOneLeaves) {
  StepFeed feed(StepFeedOptions{.max_subscribers = 2, .queue_records = 4});
  auto first = feed.Subscribe();
  const auto second = feed.Subscribe();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(feed.Subscribe(), nullptr);
  first.reset();
  EXPECT_NE(feed.Subscribe(), nullptr);
}

TEST(StepFeedTest, WatchedEndsWithTheLastSubscription) {
  StepFeed feed(StepFeedOptions{});
  auto subscription = feed.Subscribe();
  EXPECT_TRUE(feed.watched());
  subscription.reset();
  EXPECT_FALSE(feed.watched());
}

TEST(StepFeedTest, TakeWaitsForTheFirstRecord) {
  StepFeed feed(StepFeedOptions{});
  const auto subscription = feed.Subscribe();
  std::thread publisher([&feed] {
    std::this_thread::sleep_for(milliseconds(50));
    feed.Publish(2, Record(1));
  });
  const std::vector<std::string> records = subscription->Take(milliseconds(10000));
  publisher.join();
  EXPECT_THAT(records, ElementsAre("{\"worker\":2,\"step\":1}"));
}

TEST(StepFeedTest, ConcurrentPublishersLoseNothingThatFits) {
  StepFeed feed(StepFeedOptions{.max_subscribers = 1, .queue_records = 4000});
  const auto subscription = feed.Subscribe();
  std::vector<std::thread> engines;
  for (int worker = 0; worker < 4; ++worker) {
    engines.emplace_back([&feed, worker] {
      for (int step = 0; step < 1000; ++step) feed.Publish(worker, Record(step));
    });
  }
  for (std::thread& engine : engines) engine.join();
  EXPECT_EQ(subscription->Take(milliseconds(0)).size(), 4000u);
  EXPECT_EQ(subscription->dropped(), 0u);
}

}  // namespace
}  // namespace tessera::router::console
