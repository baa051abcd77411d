// PrefixCache: the index of the router's prefix cache (DESIGN.md §4). It maps the hash of a
// *full* KV block to the blocks that hold that content, and confirms every candidate exactly:
//
//   - A block's hash chains its parent's hash with its token ids; a root block (the first of a
//     sequence) chains on the hash of the request's cache salt. Hashes are only a fast filter:
//     with 64 bits collisions are rare, and they are harmless, because
//   - a hit must match exactly: the same token ids (compared one by one), the same parent
//     *block content* (BlockLink: parent id + the parent's generation, so a chain is followed
//     only through the blocks it was built on) and, for a root block, the same salt (interned:
//     compared as an exact string, never by hash).
//
// A block's generation moves on whenever it leaves the index (eviction), so the children of an
// evicted block stop matching: they are unreachable and are evicted in their turn. Blocks whose
// hashes collide share a bucket (an intrusive singly-linked list through Entry::next); buckets
// hold one block almost always.
//
// The index knows nothing of reference counts or the LRU: BlockManager owns both and erases a
// block from here when it evicts it. Memory: the token ids of every indexed block,
// [num_blocks, block_size] int32, plus one hash-map slot per block; all reserved up front, so
// Insert/Erase/Find do not allocate (AcquireSalt may, once per distinct salt).
//
// Owner: the router's engine thread (via BlockManager / Scheduler). Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "router/published_prefixes.h"

namespace tessera::router {

using BlockId = int32_t;
inline constexpr BlockId kNullBlock = 0;

// One content of a block: the id plus how often the block has left the index before. The parent
// of a root block is the null link.
struct BlockLink {
  BlockId block = kNullBlock;
  uint32_t generation = 0;
  bool operator==(const BlockLink&) const = default;
};

// An interned cache salt; 0 is the empty salt (the shared default namespace).
using SaltId = uint32_t;
inline constexpr SaltId kDefaultSalt = 0;

class PrefixCache {
 public:
  // `hash_bits` in [1, 64] keeps only the low bits of every hash. 64 in production; tests use
  // tiny widths to force collisions and prove that hits are confirmed by content.
  PrefixCache(int32_t num_blocks, int32_t block_size, int32_t hash_bits);

  PrefixCache(PrefixCache&&) = default;
  PrefixCache& operator=(PrefixCache&&) = default;
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int32_t block_size() const { return block_size_; }

  // The hashes of the full blocks of `tokens` under `salt`, chained as a 64-bit index would hash
  // them (what a PublishedPrefixes holds): for routing, before any engine has seen the request.
  static std::vector<uint64_t> PromptChain(std::span<const int32_t> tokens, std::string_view salt,
                                           int32_t block_size);
  // Indexed blocks' hashes are added to `published` and removed at eviction (null: none).
  // Precondition: 64-bit hashes, and nothing indexed yet.
  void set_published(PublishedPrefixes* published) { published_ = published; }

  // The hash a root block chains on. Precondition: `salt` is live (AcquireSalt'ed).
  uint64_t SaltHash(SaltId salt) const;
  // A full block's hash. Precondition: tokens.size() == block_size.
  uint64_t HashBlock(uint64_t parent_hash, std::span<const int32_t> tokens) const;

  // Interns `salt` with one reference (requests and indexed root blocks hold one each).
  // kDefaultSalt for the empty salt, which is never counted.
  SaltId AcquireSalt(std::string_view salt);
  // Precondition: `salt` holds a reference.
  void ReleaseSalt(SaltId salt);
  // The salt's text. Precondition: `salt` is live.
  const std::string& SaltText(SaltId salt) const;
  // Distinct non-empty salts alive (tests).
  int32_t NumSalts() const { return static_cast<int32_t>(salt_ids_.size()); }

  // The indexed block with exactly this content, or kNullBlock. `salt` is compared only for a
  // root block (parent == BlockLink{}); a child inherits its namespace from its parent.
  BlockId Find(uint64_t hash, BlockLink parent, SaltId salt,
               std::span<const int32_t> tokens) const;

  // Indexes `block` (precondition: not indexed) and returns its link. When a block with exactly
  // this content is indexed already (two requests computed the same prefix), nothing changes
  // and that block's link is returned: chains continue through the indexed copy. When the hash's
  // bucket is full (kMaxBucketLength colliding blocks: only crafted input gets there), the block
  // is not indexed and its generation moves on, as if evicted at once.
  BlockLink Insert(BlockId block, uint64_t hash, BlockLink parent, SaltId salt,
                   std::span<const int32_t> tokens);

  // Removes `block` from the index (precondition: indexed); its generation moves on.
  void Erase(BlockId block);

  bool Contains(BlockId block) const { return entries_[Index(block)].indexed; }
  // Precondition: 0 < block < num_blocks.
  BlockLink LinkOf(BlockId block) const {
    return BlockLink{block, entries_[Index(block)].generation};
  }
  int32_t size() const { return num_indexed_; }

 private:
  struct Entry {
    uint64_t hash = 0;
    BlockLink parent;
    SaltId salt = kDefaultSalt;
    BlockId next = kNullBlock;  // next block in the same hash bucket
    uint32_t generation = 0;
    bool indexed = false;
  };
  struct Salt {
    std::string text;
    uint64_t hash = 0;
    int32_t refs = 0;
  };

  size_t Index(BlockId block) const;
  std::span<const int32_t> TokensOf(BlockId block) const;
  bool Matches(BlockId block, uint64_t hash, BlockLink parent, SaltId salt,
               std::span<const int32_t> tokens) const;

  int32_t block_size_;
  uint64_t hash_mask_;
  std::vector<Entry> entries_;   // [num_blocks]
  std::vector<int32_t> tokens_;  // [num_blocks, block_size]: token ids of indexed blocks
  absl::flat_hash_map<uint64_t, BlockId> buckets_;  // hash -> first block of its bucket
  int32_t num_indexed_ = 0;

  // Salt interning: exact namespaces without trusting a hash. Entry 0 is the empty salt.
  std::vector<Salt> salts_;
  std::vector<SaltId> free_salts_;
  absl::flat_hash_map<std::string, SaltId> salt_ids_;
  PublishedPrefixes* published_ = nullptr;  // see set_published
};

}  // namespace tessera::router
