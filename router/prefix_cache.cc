#include "router/prefix_cache.h"

#include <algorithm>

#include "absl/strings/string_view.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"

namespace tessera::router {
namespace {

// splitmix64's finalizer: a cheap full-avalanche mix of 64 bits.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
// xxHash64's primes: each lane round is a bijection of the lane (odd multiplies, a rotation).
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;

uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t Round(uint64_t lane, uint64_t word) {
  return Rotl(lane + word * kPrime2, 31) * kPrime1;
}

// Two token ids per 64-bit word.
uint64_t Word(std::span<const int32_t> tokens, size_t i) {
  const uint64_t hi = static_cast<uint32_t>(tokens[i]);
  const uint64_t lo = i + 1 < tokens.size() ? static_cast<uint32_t>(tokens[i + 1]) : 0;
  return (hi << 32) | lo;
}

// A full block's hash (xxHash64-style: four independent lanes over 64-bit words, two token ids
// each, so the multiplies overlap; then the lanes, the parent and the length are mixed together).
// Not cryptographic: Find() confirms every hit by content, so a collision costs a miss at worst.
uint64_t BlockHash(uint64_t parent_hash, std::span<const int32_t> tokens, uint64_t mask) {
  uint64_t lanes[4] = {parent_hash + kPrime1 + kPrime2, parent_hash + kPrime2, parent_hash,
                       parent_hash - kPrime1};
  size_t i = 0;
  for (; i + 8 <= tokens.size(); i += 8) {
    for (size_t l = 0; l < 4; ++l) lanes[l] = Round(lanes[l], Word(tokens, i + 2 * l));
  }
  for (size_t l = 0; i < tokens.size(); i += 2, ++l) lanes[l] = Round(lanes[l], Word(tokens, i));
  uint64_t h = Rotl(lanes[0], 1) + Rotl(lanes[1], 7) + Rotl(lanes[2], 12) + Rotl(lanes[3], 18);
  return Mix(h ^ Mix(parent_hash + kGolden) ^ tokens.size()) & mask;
}

// The hash a root block chains on: FNV-1a over the salt's bytes, then mixed (distinct from every
// block hash's input domain); the empty salt's is fixed.
uint64_t SaltHashOf(std::string_view salt, uint64_t mask) {
  if (salt.empty()) return Mix(kGolden) & mask;
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : salt) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return Mix(h) & mask;
}

// A bucket longer than this is left as it is: the block is not indexed (a lost hit, never a wrong
// one). 64-bit hashes essentially never share a bucket, but the hash is not keyed, so crafted
// prompts could collide on purpose; the cap keeps every lookup O(1) even then.
constexpr int kMaxBucketLength = 8;

}  // namespace

PrefixCache::PrefixCache(int32_t num_blocks, int32_t block_size, int32_t hash_bits)
    : block_size_(block_size),
      hash_mask_(hash_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << hash_bits) - 1),
      entries_(static_cast<size_t>(std::max(num_blocks, 0))),
      tokens_(static_cast<size_t>(std::max(num_blocks, 0)) * static_cast<size_t>(block_size)) {
  TESSERA_CHECK(num_blocks >= 1 && block_size >= 1, "PrefixCache needs blocks of >= 1 token");
  TESSERA_CHECK(hash_bits >= 1 && hash_bits <= 64, "PrefixCache hash_bits must be in [1, 64]");
  // Twice the blocks: erased buckets leave tombstones, and the table must never grow (allocate)
  // on the engine thread's hot path.
  buckets_.reserve(2 * static_cast<size_t>(num_blocks));
  salts_.push_back(Salt{"", SaltHashOf("", hash_mask_), 0});  // kDefaultSalt
}

size_t PrefixCache::Index(BlockId block) const {
  TESSERA_CHECK(block > kNullBlock && static_cast<size_t>(block) < entries_.size(),
                "prefix cache: KV block id out of range (or the null block)");
  return static_cast<size_t>(block);
}

std::span<const int32_t> PrefixCache::TokensOf(BlockId block) const {
  return std::span<const int32_t>(tokens_).subspan(Index(block) * static_cast<size_t>(block_size_),
                                                   static_cast<size_t>(block_size_));
}

uint64_t PrefixCache::SaltHash(SaltId salt) const {
  TESSERA_CHECK(salt < salts_.size() && (salt == kDefaultSalt || salts_[salt].refs > 0),
                "prefix cache: salt id is not live");
  return salts_[salt].hash;
}

uint64_t PrefixCache::HashBlock(uint64_t parent_hash, std::span<const int32_t> tokens) const {
  TESSERA_CHECK(tokens.size() == static_cast<size_t>(block_size_),
                "prefix cache: only full blocks are hashed");
  return BlockHash(parent_hash, tokens, hash_mask_);
}

std::vector<uint64_t> PrefixCache::PromptChain(std::span<const int32_t> tokens,
                                               std::string_view salt, int32_t block_size) {
  std::vector<uint64_t> chain;
  if (block_size < 1) return chain;
  uint64_t parent = SaltHashOf(salt, ~uint64_t{0});
  for (size_t begin = 0; begin + static_cast<size_t>(block_size) <= tokens.size();
       begin += static_cast<size_t>(block_size)) {
    parent = BlockHash(parent, tokens.subspan(begin, static_cast<size_t>(block_size)),
                       ~uint64_t{0});
    chain.push_back(parent);
  }
  return chain;
}

SaltId PrefixCache::AcquireSalt(std::string_view salt) {
  if (salt.empty()) return kDefaultSalt;
  const absl::string_view key = util::ToAbsl(salt);
  if (const auto it = salt_ids_.find(key); it != salt_ids_.end()) {
    ++salts_[it->second].refs;
    return it->second;
  }
  SaltId id;
  if (!free_salts_.empty()) {
    id = free_salts_.back();
    free_salts_.pop_back();
  } else {
    id = static_cast<SaltId>(salts_.size());
    salts_.emplace_back();
  }
  salts_[id] = Salt{std::string(salt), SaltHashOf(salt, hash_mask_), 1};
  salt_ids_.emplace(salts_[id].text, id);
  return id;
}

void PrefixCache::ReleaseSalt(SaltId salt) {
  if (salt == kDefaultSalt) return;
  TESSERA_CHECK(salt < salts_.size() && salts_[salt].refs > 0,
                "prefix cache: releasing a salt that holds no reference");
  if (--salts_[salt].refs > 0) return;
  salt_ids_.erase(salts_[salt].text);
  salts_[salt].text.clear();
  free_salts_.push_back(salt);
}

const std::string& PrefixCache::SaltText(SaltId salt) const {
  TESSERA_CHECK(salt < salts_.size() && (salt == kDefaultSalt || salts_[salt].refs > 0),
                "prefix cache: salt id is not live");
  return salts_[salt].text;
}

bool PrefixCache::Matches(BlockId block, uint64_t hash, BlockLink parent, SaltId salt,
                          std::span<const int32_t> tokens) const {
  const Entry& e = entries_[Index(block)];
  if (e.hash != hash || e.parent != parent) return false;
  if (parent.block == kNullBlock && e.salt != salt) return false;
  const std::span<const int32_t> stored = TokensOf(block);
  return std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end());
}

BlockId PrefixCache::Find(uint64_t hash, BlockLink parent, SaltId salt,
                          std::span<const int32_t> tokens) const {
  const auto it = buckets_.find(hash);
  if (it == buckets_.end()) return kNullBlock;
  for (BlockId b = it->second; b != kNullBlock; b = entries_[Index(b)].next) {
    if (Matches(b, hash, parent, salt, tokens)) return b;
  }
  return kNullBlock;
}

BlockLink PrefixCache::Insert(BlockId block, uint64_t hash, BlockLink parent, SaltId salt,
                              std::span<const int32_t> tokens) {
  Entry& e = entries_[Index(block)];
  TESSERA_CHECK(!e.indexed, "prefix cache: block indexed twice");
  TESSERA_CHECK(tokens.size() == static_cast<size_t>(block_size_),
                "prefix cache: only full blocks are indexed");
  const bool root = parent.block == kNullBlock;
  if (!root) salt = kDefaultSalt;  // a child's namespace is its parent's
  // One probe: a new bucket (the usual case) cannot hold a duplicate.
  auto [it, inserted] = buckets_.try_emplace(hash, block);
  if (!inserted) {
    int length = 0;
    for (BlockId b = it->second; b != kNullBlock; b = entries_[Index(b)].next, ++length) {
      if (Matches(b, hash, parent, salt, tokens)) return LinkOf(b);
    }
    if (length >= kMaxBucketLength) {
      // Not indexed. Treated as evicted at once: its generation moves on, so blocks chained on
      // this content can never match whatever the block holds next.
      const BlockLink link = LinkOf(block);
      ++e.generation;
      return link;
    }
    e.next = it->second;
    it->second = block;  // new blocks go to the front of their bucket
  } else {
    e.next = kNullBlock;
  }
  e.hash = hash;
  e.parent = parent;
  e.salt = salt;
  e.indexed = true;
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(Index(block)) * block_size_);
  if (root && salt != kDefaultSalt) ++salts_[salt].refs;  // the root keeps its namespace alive
  ++num_indexed_;
  if (published_ != nullptr) published_->Add(hash);
  return LinkOf(block);
}

void PrefixCache::Erase(BlockId block) {
  Entry& e = entries_[Index(block)];
  TESSERA_CHECK(e.indexed, "prefix cache: erasing a block that is not indexed");
  const auto it = buckets_.find(e.hash);
  TESSERA_CHECK(it != buckets_.end(), "prefix cache: an indexed block's bucket is missing");
  if (it->second == block) {
    if (e.next == kNullBlock) {
      buckets_.erase(it);
    } else {
      it->second = e.next;
    }
  } else {
    BlockId prev = it->second;
    while (entries_[Index(prev)].next != block) {
      prev = entries_[Index(prev)].next;
      TESSERA_CHECK(prev != kNullBlock,
                    "prefix cache: an indexed block is missing from its bucket");
    }
    entries_[Index(prev)].next = e.next;
  }
  if (e.parent.block == kNullBlock) ReleaseSalt(e.salt);
  if (published_ != nullptr) published_->Remove(e.hash);
  const uint32_t generation = e.generation + 1;
  e = Entry{};
  e.generation = generation;  // links to the old content no longer match
  --num_indexed_;
}

}  // namespace tessera::router
