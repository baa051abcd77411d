#include "common/http/body_budget.h"

#include "common/util/check.h"

namespace tessera::http {

bool BodyBudget::Resize(const std::string& client, size_t* held, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t& mine = per_client_[client];
  TESSERA_CHECK(*held <= mine && mine <= used_, "a body share larger than its client's total");
  const bool fits = bytes <= *held || (used_ - *held + bytes <= max_bytes_ &&
                                       mine - *held + bytes <= max_bytes_ / 4);
  if (fits) {
    used_ = used_ - *held + bytes;
    mine = mine - *held + bytes;
    *held = bytes;
  }
  if (mine == 0) per_client_.erase(client);
  return fits;
}

size_t BodyBudget::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

}  // namespace tessera::http
