// StepFeed: the web console's live copy of the step records (the same JSON as `--trace-steps`,
// router/step_recorder.h, with the worker's index in front), fanned out to the browsers that
// watch the batch view (GET /v1/console/events, console_routes.h).
//
// Bounded: each subscriber has a queue of at most `queue_records` records; a subscriber that
// reads slower than steps arrive (a stalled or slow browser) loses its oldest records, counted
// per subscriber (sent to it, so the page can say so) and in `dropped` (a Prometheus counter).
// At most `max_subscribers` watch at once; Subscribe refuses more. So the feed's memory is at
// most max_subscribers * queue_records records, whatever the clients do.
//
// Free when nobody watches: the engines ask watched() (one relaxed atomic load) before they
// build a record for the feed, and Publish returns at once without subscribers.
//
// Threading: Publish from any engine thread; Subscribe from a route thread; a Subscription is
// used by the one route thread that holds it, and ends (unsubscribes) when destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus {
class Counter;
}

namespace tessera::router::console {

struct StepFeedOptions {
  size_t max_subscribers = 8;
  size_t queue_records = 2048;  // per subscriber; a record is ~200 bytes + ~120 per request
};

class StepFeed {
 public:
  // `dropped` (may be null) counts every record a subscriber lost; it outlives the feed.
  explicit StepFeed(StepFeedOptions options, prometheus::Counter* dropped = nullptr);
  StepFeed(const StepFeed&) = delete;
  StepFeed& operator=(const StepFeed&) = delete;

  // Whether anyone watches: the engines skip building records for the feed when not.
  bool watched() const { return num_subscribers_.load(std::memory_order_relaxed) > 0; }

  // One step record from worker `worker`: `record` is a JSON object (`{"step":...}`); the
  // subscribers get `{"worker":W,"step":...}`.
  void Publish(int worker, std::string_view record);

  class Subscription {
   public:
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

    // The records queued for this subscriber, oldest first, waiting up to `timeout` for the
    // first; empty on timeout.
    std::vector<std::string> Take(std::chrono::milliseconds timeout);
    // Records this subscriber lost to a full queue, since it subscribed.
    uint64_t dropped() const;

   private:
    friend class StepFeed;
    explicit Subscription(StepFeed* feed) : feed_(feed) {}

    StepFeed* const feed_;
    std::deque<std::string> queue_;  // guarded by feed_->mutex_
    uint64_t dropped_ = 0;           // guarded by feed_->mutex_
  };

  // A new subscriber, or null when max_subscribers already watch.
  std::unique_ptr<Subscription> Subscribe();

  size_t max_subscribers() const { return options_.max_subscribers; }

 private:
  void Unsubscribe(Subscription* subscription);

  const StepFeedOptions options_;
  prometheus::Counter* const dropped_;
  std::atomic<size_t> num_subscribers_{0};
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<Subscription*> subscribers_;  // guarded by mutex_
};

}  // namespace tessera::router::console
