// The hashes of the full KV blocks one engine's prefix cache holds, readable from any thread: the
// engine group (engine_group.h) scores a new request's cached prefix on each engine with it
// before the request reaches any engine. The engine thread's PrefixCache adds a block's hash when
// it indexes the block and removes it at eviction; a hash is a 64-bit digest of the block's
// content and of every block before it (PrefixCache::PromptChain), so a chain matched here is the
// request's prefix up to a collision, which costs a routing choice at worst: the engine confirms
// every hit by content.
//
// Threading: Add/Remove/Clear from the owning engine's thread, MatchedBlocks from any thread;
// one mutex, held for a hash-map operation or one chain walk.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>

#include "absl/container/flat_hash_map.h"

namespace tessera::router {

class PublishedPrefixes {
 public:
  void Add(uint64_t hash) {
    std::lock_guard lock(mutex_);
    ++counts_[hash];
  }
  void Remove(uint64_t hash) {
    std::lock_guard lock(mutex_);
    const auto it = counts_.find(hash);
    if (it != counts_.end() && --it->second == 0) counts_.erase(it);
  }
  void Clear() {
    std::lock_guard lock(mutex_);
    counts_.clear();
  }
  // How many leading hashes of `chain` (a prompt's block chain) are held.
  int MatchedBlocks(std::span<const uint64_t> chain) const {
    std::lock_guard lock(mutex_);
    int matched = 0;
    while (matched < static_cast<int>(chain.size()) &&
           counts_.contains(chain[static_cast<size_t>(matched)])) {
      ++matched;
    }
    return matched;
  }

 private:
  mutable std::mutex mutex_;
  absl::flat_hash_map<uint64_t, int32_t> counts_;
};

}  // namespace tessera::router
