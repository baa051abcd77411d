// ConnectionLimits: how many connections the HTTP server holds, in all and per client address.
// A connection takes a slot at accept (TryAcquire) and gives it back when its slot is destroyed.
//
// Threading: thread-safe (slots may be released on any thread).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace tessera::http {

class ConnectionLimits {
 public:
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    friend class ConnectionLimits;
    Slot(std::shared_ptr<ConnectionLimits> limits, std::string client);
    std::shared_ptr<ConnectionLimits> limits_;
    std::string client_;
  };

  static std::shared_ptr<ConnectionLimits> Create(int max_total, int max_per_client);

  // A slot for one more connection from `client`, or nullopt when a cap is reached.
  std::optional<Slot> TryAcquire(const std::string& client);
  int total() const;

 private:
  ConnectionLimits(int max_total, int max_per_client);
  void Release(const std::string& client);

  const int max_total_;
  const int max_per_client_;
  mutable std::mutex mutex_;
  int total_ = 0;                                     // guarded by mutex_
  std::unordered_map<std::string, int> per_client_;  // guarded by mutex_; no zero entries
  std::weak_ptr<ConnectionLimits> self_;
};

}  // namespace tessera::http
