// BodyBudget: the bytes of request bodies all connections of one HTTP server may hold at once.
// A body is read piece by piece and its connection grows its share as the bytes arrive, so the
// budget counts what is really buffered (a client that declares 32 MiB and trickles holds only
// what it sent). A connection whose next piece would pass the budget is refused (503).
//
// Threading: thread-safe.
#pragma once

#include <cstddef>
#include <mutex>

namespace tessera::http {

class BodyBudget {
 public:
  explicit BodyBudget(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Sets a holder's share from `*held` to `bytes`. False, with nothing changed, when growing it
  // would pass the budget; shrinking always succeeds.
  bool Resize(size_t* held, size_t bytes);
  size_t used() const;

 private:
  const size_t max_bytes_;
  mutable std::mutex mutex_;
  size_t used_ = 0;  // guarded by mutex_
};

}  // namespace tessera::http
