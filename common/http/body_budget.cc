#include "common/http/body_budget.h"

#include "common/util/check.h"

namespace tessera::http {

bool BodyBudget::Resize(size_t* held, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  TESSERA_CHECK(*held <= used_, "a body share larger than the budget's total");
  const size_t others = used_ - *held;
  if (bytes > *held && others + bytes > max_bytes_) return false;
  used_ = others + bytes;
  *held = bytes;
  return true;
}

size_t BodyBudget::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

}  // namespace tessera::http
