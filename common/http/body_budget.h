// BodyBudget: the bytes of request bodies the connections of one HTTP server may hold at once, in
// all and per client address. A body with a Content-Length reserves its whole length when its
// head arrives (all or nothing, first come first served: concurrent large bodies never starve
// one another half-read); a chunked body grows its share as its bytes arrive. A request whose
// share does not fit is refused (503), and a client may hold only a quarter of the budget, so one
// client cannot fill it.
//
// Threading: thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tessera::http {

class BodyBudget {
 public:
  explicit BodyBudget(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Sets a holder's share, held for `client`, from `*held` to `bytes`. False, with nothing
  // changed, when growing it would pass the budget or the client's quarter of it; shrinking
  // always succeeds.
  bool Resize(const std::string& client, size_t* held, size_t bytes);
  size_t used() const;

 private:
  const size_t max_bytes_;
  mutable std::mutex mutex_;
  size_t used_ = 0;                                      // guarded by mutex_
  std::unordered_map<std::string, size_t> per_client_;  // guarded by mutex_; no zero entries
};

}  // namespace tessera::http
