#include "common/http/connection_limits.h"

#include <utility>

#include "common/util/check.h"

namespace tessera::http {

ConnectionLimits::Slot::Slot(std::shared_ptr<ConnectionLimits> limits, std::string client)
    : limits_(std::move(limits)), client_(std::move(client)) {}

ConnectionLimits::Slot::Slot(Slot&& other) noexcept
    : limits_(std::move(other.limits_)), client_(std::move(other.client_)) {}

ConnectionLimits::Slot::~Slot() {
  if (limits_ != nullptr) limits_->Release(client_);
}

std::shared_ptr<ConnectionLimits> ConnectionLimits::Create(int max_total, int max_per_client) {
  std::shared_ptr<ConnectionLimits> limits(new ConnectionLimits(max_total, max_per_client));
  limits->self_ = limits;
  return limits;
}

ConnectionLimits::ConnectionLimits(int max_total, int max_per_client)
    : max_total_(max_total), max_per_client_(max_per_client) {}

std::optional<ConnectionLimits::Slot> ConnectionLimits::TryAcquire(const std::string& client) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (total_ >= max_total_) return std::nullopt;
  int& mine = per_client_[client];
  if (mine >= max_per_client_) return std::nullopt;  // mine > 0: no empty entry is left
  ++mine;
  ++total_;
  return Slot(self_.lock(), client);
}

int ConnectionLimits::total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

void ConnectionLimits::Release(const std::string& client) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = per_client_.find(client);
  TESSERA_CHECK(it != per_client_.end() && it->second > 0 && total_ > 0,
                "a connection slot was released twice");
  if (--it->second == 0) per_client_.erase(it);
  --total_;
}

}  // namespace tessera::http
