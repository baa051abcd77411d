#include "router/console/step_feed.h"

#include <algorithm>
#include <utility>

#include "common/util/check.h"
#include "prometheus/counter.h"

namespace tessera::router::console {

StepFeed::StepFeed(StepFeedOptions options, prometheus::Counter* dropped)
    : options_(options), dropped_(dropped) {
  TESSERA_CHECK(options_.queue_records > 0, "StepFeed: queue_records must be positive");
}

void StepFeed::Publish(int worker, std::string_view record) {
  if (!watched()) return;
  TESSERA_CHECK(!record.empty() && record.front() == '{', "StepFeed: a record is a JSON object");
  std::string tagged = "{\"worker\":" + std::to_string(worker);
  if (record.size() > 2) tagged += ',';
  tagged.append(record.substr(1));
  uint64_t lost = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Subscription* subscriber : subscribers_) {
      if (subscriber->queue_.size() >= options_.queue_records) {
        subscriber->queue_.pop_front();
        ++subscriber->dropped_;
        ++lost;
      }
      subscriber->queue_.push_back(tagged);
    }
  }
  if (lost > 0 && dropped_ != nullptr) dropped_->Increment(static_cast<double>(lost));
  arrived_.notify_all();
}

std::unique_ptr<StepFeed::Subscription> StepFeed::Subscribe() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (subscribers_.size() >= options_.max_subscribers) return nullptr;
  std::unique_ptr<Subscription> subscription(new Subscription(this));
  subscribers_.push_back(subscription.get());
  num_subscribers_.store(subscribers_.size(), std::memory_order_relaxed);
  return subscription;
}

void StepFeed::Unsubscribe(Subscription* subscription) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = std::find(subscribers_.begin(), subscribers_.end(), subscription);
  TESSERA_CHECK(it != subscribers_.end(), "StepFeed: unsubscribing an unknown subscriber");
  subscribers_.erase(it);
  num_subscribers_.store(subscribers_.size(), std::memory_order_relaxed);
}

StepFeed::Subscription::~Subscription() { feed_->Unsubscribe(this); }

std::vector<std::string> StepFeed::Subscription::Take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(feed_->mutex_);
  feed_->arrived_.wait_for(lock, timeout, [this] { return !queue_.empty(); });
  std::vector<std::string> records(std::make_move_iterator(queue_.begin()),
                                   std::make_move_iterator(queue_.end()));
  queue_.clear();
  return records;
}

uint64_t StepFeed::Subscription::dropped() const {
  std::lock_guard<std::mutex> lock(feed_->mutex_);
  return dropped_;
}

}  // namespace tessera::router::console
