#include "common/tokenizer/word_cache.h"

#include "absl/hash/hash.h"
#include "common/util/absl_compat.h"

namespace tessera::tokenizer {

WordCache::WordCache(size_t capacity)
    : shard_capacity_(capacity == 0 ? 0 : (capacity + kNumShards - 1) / kNumShards) {}

WordCache::Shard& WordCache::ShardFor(std::string_view word) const {
  // High bits pick the shard; the map inside hashes again with its own seed, so the two are
  // independent and each shard's table stays well spread.
  const size_t hash = absl::Hash<absl::string_view>()(util::ToAbsl(word));
  return shards_[(hash >> 56) % kNumShards];
}

bool WordCache::Lookup(std::string_view word, std::vector<TokenId>* out) const {
  if (!enabled()) return false;
  Shard& shard = ShardFor(word);
  absl::MutexLock lock(&shard.mutex);
  auto it = shard.words.find(util::ToAbsl(word));
  if (it == shard.words.end()) return false;
  out->insert(out->end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::Store(std::string_view word, std::span<const TokenId> ids) const {
  if (!enabled()) return;
  Shard& shard = ShardFor(word);
  absl::MutexLock lock(&shard.mutex);
  if (shard.words.size() >= shard_capacity_) shard.words.clear();
  shard.words.try_emplace(std::string(word), ids.begin(), ids.end());
}

}  // namespace tessera::tokenizer
