// WordCache: a bounded memo of pre-tokenized word -> BPE ids, shared by all threads encoding with
// one tokenizer. Sharded by hash (16 mutexes) so concurrent encodes rarely contend; each shard
// starts over when full (cheap, and the hot words - " the", "\n" - come back at once).
//
// Threading: Lookup/Store may run concurrently from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "common/tokenizer/tokenizer.h"

namespace tessera::tokenizer {

class WordCache {
 public:
  // Holds about `capacity` words in total; 0 disables the cache (Lookup always misses).
  explicit WordCache(size_t capacity);

  bool enabled() const { return shard_capacity_ > 0; }
  // On a hit appends the cached ids to `out` and returns true.
  bool Lookup(std::string_view word, std::vector<TokenId>* out) const;
  void Store(std::string_view word, std::span<const TokenId> ids) const;

 private:
  static constexpr size_t kNumShards = 16;
  struct Shard {
    absl::Mutex mutex;
    // Most words are 1-4 tokens: inline storage avoids an allocation per entry.
    absl::flat_hash_map<std::string, absl::InlinedVector<TokenId, 4>> words ABSL_GUARDED_BY(mutex);
  };
  Shard& ShardFor(std::string_view word) const;

  size_t shard_capacity_;
  mutable std::array<Shard, kNumShards> shards_;
};

}  // namespace tessera::tokenizer
