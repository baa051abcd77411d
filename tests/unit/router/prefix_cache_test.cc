// The prefix cache's index (PrefixCache: hash chain, exact confirmation, salts) and the LRU of
// cached free blocks in BlockManager: exact ids and eviction order on tiny pools.
#include "router/prefix_cache.h"

#include <random>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "router/block_manager.h"

namespace tessera::router {
namespace {

using Tokens = std::vector<int32_t>;

// Block size 4 throughout.
constexpr int32_t kBs = 4;

TEST(PrefixCacheTest, HashChainsParentAndTokens) {
  PrefixCache c(8, kBs, 64);
  const uint64_t root = c.SaltHash(kDefaultSalt);
  const Tokens a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  // Deterministic: a second cache built the same way, given the same tokens in another buffer,
  // computes the same chain (the router rebuilds its index from hashes it computed earlier).
  PrefixCache twin(8, kBs, 64);
  const Tokens a_copy(a.begin(), a.end());
  EXPECT_EQ(twin.SaltHash(kDefaultSalt), root);
  EXPECT_EQ(twin.HashBlock(twin.SaltHash(kDefaultSalt), a_copy), c.HashBlock(root, a));
  EXPECT_EQ(twin.HashBlock(c.HashBlock(root, a), b), c.HashBlock(c.HashBlock(root, a_copy), b));
  EXPECT_NE(c.HashBlock(root, a), c.HashBlock(root, b));
  EXPECT_NE(c.HashBlock(root, a), c.HashBlock(root + 1, a));  // the parent is in the hash
  EXPECT_NE(c.HashBlock(root, Tokens{2, 1, 3, 4}), c.HashBlock(root, a));  // order matters
  PrefixCache narrow(8, kBs, 5);
  EXPECT_LT(narrow.HashBlock(root, a), 32u);
}

// What routing reads (engine_group.h): PromptChain hashes a prompt the way the scheduler chains
// its blocks (the salt's root, then block by block), the indexed blocks' hashes are published and
// eviction takes them back, so MatchedBlocks counts a prompt's cached leading blocks.
TEST(PrefixCacheTest, PublishedHashesAreThePromptChain) {
  PrefixCache c(8, kBs, 64);
  PublishedPrefixes published;
  c.set_published(&published);
  const Tokens prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};  // 3 full blocks + 1
  const SaltId salt = c.AcquireSalt("tenant-a");
  uint64_t hash = c.SaltHash(salt);
  BlockLink link;
  for (int b = 0; b < 2; ++b) {  // the first two blocks cached
    const std::span<const int32_t> block(prompt.data() + b * kBs, kBs);
    hash = c.HashBlock(hash, block);
    link = c.Insert(b + 1, hash, link, salt, block);
  }
  const std::vector<uint64_t> chain = PrefixCache::PromptChain(prompt, "tenant-a", kBs);
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(published.MatchedBlocks(chain), 2);
  EXPECT_EQ(published.MatchedBlocks(PrefixCache::PromptChain(prompt, "tenant-b", kBs)), 0);
  EXPECT_EQ(published.MatchedBlocks(PrefixCache::PromptChain(prompt, "", kBs)), 0);
  c.Erase(2);  // the second block evicted
  EXPECT_EQ(published.MatchedBlocks(chain), 1);
  c.Erase(1);
  EXPECT_EQ(published.MatchedBlocks(chain), 0);
}

TEST(PrefixCacheTest, FindsOnlyTheExactContent) {
  PrefixCache c(8, kBs, 64);
  const Tokens a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  const uint64_t ha = c.HashBlock(c.SaltHash(kDefaultSalt), a);
  const BlockLink la = c.Insert(3, ha, BlockLink{}, kDefaultSalt, a);
  EXPECT_EQ(la, c.LinkOf(3));
  const uint64_t hb = c.HashBlock(ha, b);
  c.Insert(5, hb, la, kDefaultSalt, b);
  EXPECT_EQ(c.size(), 2);
  EXPECT_EQ(c.Find(ha, BlockLink{}, kDefaultSalt, a), 3);
  EXPECT_EQ(c.Find(hb, la, kDefaultSalt, b), 5);
  // Same tokens and hash, other parent: a miss (the chain is followed block by block).
  EXPECT_EQ(c.Find(hb, BlockLink{}, kDefaultSalt, b), kNullBlock);
  EXPECT_EQ(c.Find(hb, BlockLink{3, la.generation + 1}, kDefaultSalt, b), kNullBlock);
  EXPECT_EQ(c.Find(ha, BlockLink{}, kDefaultSalt, b), kNullBlock);  // hash hit, other tokens
}

// One hash bit: every block collides with half of the others. Finds stay exact, and erasing
// from the head, the middle or the tail of a bucket keeps the rest findable.
TEST(PrefixCacheTest, CollidingHashesAreResolvedByTokens) {
  PrefixCache c(16, kBs, 1);
  std::vector<Tokens> contents;
  for (int32_t i = 0; i < 8; ++i) contents.push_back(Tokens{i, i, i, i});
  const uint64_t root = c.SaltHash(kDefaultSalt);
  for (int32_t i = 0; i < 8; ++i) {
    const uint64_t h = c.HashBlock(root, contents[i]);
    ASSERT_LE(h, 1u);
    c.Insert(i + 1, h, BlockLink{}, kDefaultSalt, contents[i]);
  }
  auto find = [&](int32_t i) {
    return c.Find(c.HashBlock(root, contents[i]), BlockLink{}, kDefaultSalt, contents[i]);
  };
  for (int32_t i = 0; i < 8; ++i) EXPECT_EQ(find(i), i + 1) << i;
  EXPECT_EQ(c.Find(0, BlockLink{}, kDefaultSalt, Tokens{9, 9, 9, 9}), kNullBlock);
  EXPECT_EQ(c.Find(1, BlockLink{}, kDefaultSalt, Tokens{9, 9, 9, 9}), kNullBlock);
  for (int32_t gone : {1, 8, 4, 5}) {
    c.Erase(gone);
    EXPECT_FALSE(c.Contains(gone));
    for (int32_t i = 0; i < 8; ++i) {
      EXPECT_EQ(find(i), c.Contains(i + 1) ? i + 1 : kNullBlock) << "after erasing " << gone;
    }
  }
  EXPECT_EQ(c.size(), 4);
}

// With a one-bit hash, two different parents of the same child tokens collide: only the parent
// link (block + generation) tells the chains apart.
TEST(PrefixCacheTest, ParentIdentityNotParentHash) {
  PrefixCache c(8, kBs, 1);
  const Tokens p1 = {1, 1, 1, 1}, p2 = {2, 2, 2, 2}, child = {7, 7, 7, 7};
  const uint64_t root = c.SaltHash(kDefaultSalt);
  const BlockLink l1 = c.Insert(1, c.HashBlock(root, p1), BlockLink{}, kDefaultSalt, p1);
  const BlockLink l2 = c.Insert(2, c.HashBlock(root, p2), BlockLink{}, kDefaultSalt, p2);
  const uint64_t hc1 = c.HashBlock(c.HashBlock(root, p1), child);
  c.Insert(3, hc1, l1, kDefaultSalt, child);
  const uint64_t hc2 = c.HashBlock(c.HashBlock(root, p2), child);
  EXPECT_EQ(c.Find(hc2, l2, kDefaultSalt, child), kNullBlock);
  EXPECT_EQ(c.Find(hc1, l1, kDefaultSalt, child), 3);
  // The parent leaves the index and comes back with the same content: its generation moved on,
  // so the old child is unreachable (it was built on the evicted copy).
  c.Erase(1);
  const BlockLink again = c.Insert(1, c.HashBlock(root, p1), BlockLink{}, kDefaultSalt, p1);
  EXPECT_EQ(again.block, 1);
  EXPECT_NE(again.generation, l1.generation);
  EXPECT_EQ(c.Find(hc1, again, kDefaultSalt, child), kNullBlock);
}

// A one-bit hash puts everything into two buckets; each holds at most 8 blocks. A refused block
// is not indexed and its generation moves on, so nothing chained on that content can match what
// the block holds later.
TEST(PrefixCacheTest, BucketsAreCapped) {
  PrefixCache c(64, kBs, 1);
  const uint64_t root = c.SaltHash(kDefaultSalt);
  int indexed = 0;
  BlockLink refused;
  for (int32_t i = 1; i <= 40; ++i) {
    const Tokens t = {i, i, i, i};
    const BlockLink link = c.Insert(i, c.HashBlock(root, t), BlockLink{}, kDefaultSalt, t);
    EXPECT_EQ(link.block, i);
    if (c.Contains(i)) {
      ++indexed;
      EXPECT_EQ(link, c.LinkOf(i));
    } else {
      EXPECT_NE(link, c.LinkOf(i)) << "a refused block keeps its generation";
      refused = link;
    }
  }
  EXPECT_EQ(indexed, 16);
  EXPECT_EQ(c.size(), 16);
  ASSERT_NE(refused.block, kNullBlock);
  // Blocks chained on the refused content name `refused` as their parent; whatever the block
  // holds next is indexed under a newer generation, so those links never match it.
  const Tokens next = {77, 77, 77, 77};
  for (BlockId b = 1; b <= 40; ++b) {  // make room in every bucket
    if (c.Contains(b)) c.Erase(b);
  }
  const BlockLink again = c.Insert(refused.block, c.HashBlock(root, next), BlockLink{},
                                   kDefaultSalt, next);
  ASSERT_TRUE(c.Contains(refused.block));
  EXPECT_NE(again, refused);
}

TEST(PrefixCacheTest, DuplicateContentKeepsTheIndexedCopy) {
  PrefixCache c(8, kBs, 64);
  const Tokens a = {1, 2, 3, 4};
  const uint64_t h = c.HashBlock(c.SaltHash(kDefaultSalt), a);
  const BlockLink first = c.Insert(2, h, BlockLink{}, kDefaultSalt, a);
  const BlockLink second = c.Insert(6, h, BlockLink{}, kDefaultSalt, a);
  EXPECT_EQ(second, first);  // chains continue through block 2
  EXPECT_FALSE(c.Contains(6));
  EXPECT_EQ(c.size(), 1);
}

TEST(PrefixCacheTest, SaltsAreExactNamespaces) {
  // One hash bit: the salts' hashes collide too; the interned text still tells them apart.
  PrefixCache c(8, kBs, 1);
  const SaltId a = c.AcquireSalt("tenant-a");
  const SaltId b = c.AcquireSalt("tenant-b");
  EXPECT_NE(a, b);
  EXPECT_EQ(c.AcquireSalt("tenant-a"), a);
  EXPECT_EQ(c.AcquireSalt(""), kDefaultSalt);
  EXPECT_EQ(c.NumSalts(), 2);
  const Tokens t = {1, 2, 3, 4};
  const uint64_t ha = c.HashBlock(c.SaltHash(a), t);
  c.Insert(1, ha, BlockLink{}, a, t);
  EXPECT_EQ(c.Find(ha, BlockLink{}, a, t), 1);
  EXPECT_EQ(c.Find(ha, BlockLink{}, b, t), kNullBlock);
  EXPECT_EQ(c.Find(ha, BlockLink{}, kDefaultSalt, t), kNullBlock);
  // The indexed root keeps "tenant-a" alive after every request let go of it.
  c.ReleaseSalt(a);
  c.ReleaseSalt(a);
  EXPECT_EQ(c.SaltText(a), "tenant-a");
  c.ReleaseSalt(b);
  EXPECT_EQ(c.NumSalts(), 1);
  c.Erase(1);
  EXPECT_EQ(c.NumSalts(), 0);
  EXPECT_EQ(c.AcquireSalt("tenant-c"), a);  // ids are recycled, last freed first
}

// --- BlockManager with the cache on: the LRU of cached free blocks. ---

PrefixCacheOptions On() { return PrefixCacheOptions{.enabled = true, .block_size = kBs}; }

// Registers block `id` as a root holding {v, v, v, v}.
void RegisterRoot(BlockManager& m, BlockId id, int32_t v) {
  const Tokens t = {v, v, v, v};
  m.Register(id, m.cache().HashBlock(m.cache().SaltHash(kDefaultSalt), t), BlockLink{},
             kDefaultSalt, t);
}

BlockId FindRoot(const BlockManager& m, int32_t v) {
  const Tokens t = {v, v, v, v};
  return m.cache().Find(m.cache().HashBlock(m.cache().SaltHash(kDefaultSalt), t), BlockLink{},
                        kDefaultSalt, t);
}

TEST(BlockManagerCacheTest, CachedFreeBlocksAreEvictedOldestFirstAfterUncachedOnes) {
  BlockManager m(6, On());  // 5 usable blocks
  for (BlockId id = 1; id <= 5; ++id) ASSERT_EQ(m.Allocate(), id);
  for (BlockId id = 1; id <= 3; ++id) RegisterRoot(m, id, 10 * id);
  for (BlockId id : {2, 5, 3, 1, 4}) m.Free(id);  // cached ones to the LRU: 2, 3, 1
  EXPECT_EQ(m.NumUncachedFree(), 2);
  EXPECT_EQ(m.NumCachedFree(), 3);
  EXPECT_EQ(m.NumFree(), 5);
  EXPECT_EQ(m.NumUsed(), 0);
  EXPECT_EQ(FindRoot(m, 20), 2);  // still findable while free
  // Never-hashed blocks first (LIFO), then the least recently freed cached block.
  EXPECT_EQ(m.Allocate(), 4);
  EXPECT_EQ(m.Allocate(), 5);
  EXPECT_EQ(m.Allocate(), 2);
  EXPECT_FALSE(m.IsCached(2));
  EXPECT_EQ(FindRoot(m, 20), kNullBlock);  // evicted: gone from the index
  EXPECT_EQ(FindRoot(m, 30), 3);
  EXPECT_EQ(m.Allocate(), 3);
  EXPECT_EQ(m.Allocate(), 1);
  EXPECT_EQ(m.cache().size(), 0);
  EXPECT_FALSE(m.CanAllocate(1));
}

TEST(BlockManagerCacheTest, AHitTakesTheBlockOutOfTheLru) {
  BlockManager m(4, On());  // 3 usable blocks
  for (BlockId id = 1; id <= 3; ++id) ASSERT_EQ(m.Allocate(), id);
  for (BlockId id = 1; id <= 3; ++id) RegisterRoot(m, id, id);
  m.FreeTable(std::vector<BlockId>{1, 2, 3});  // LRU: 3, 2, 1 (a table's tail goes first)
  ASSERT_EQ(FindRoot(m, 3), 3);
  m.Reuse(3);  // the oldest, revived by a hit
  EXPECT_EQ(m.RefCount(3), 1);
  EXPECT_EQ(m.NumCachedFree(), 2);
  EXPECT_EQ(m.NumUsed(), 1);
  m.Reuse(3);  // shared by a second table
  EXPECT_EQ(m.RefCount(3), 2);
  EXPECT_EQ(m.Allocate(), 2);  // evicts the oldest left, not the block in use
  EXPECT_EQ(m.Allocate(), 1);
  EXPECT_FALSE(m.CanAllocate(1));
  m.Free(3);
  m.Free(3);
  EXPECT_EQ(m.NumCachedFree(), 1);
  EXPECT_EQ(FindRoot(m, 3), 3);
}

TEST(BlockManagerCacheTest, CacheOffKeepsThePlainFreeStack) {
  BlockManager m(4);
  EXPECT_FALSE(m.caching());
  EXPECT_FALSE(m.IsCached(1));
  const BlockId id = m.Allocate();
  m.Free(id);
  EXPECT_EQ(m.NumCachedFree(), 0);
  EXPECT_EQ(m.Allocate(), id);
}

// Random allocate / register / reuse / free: refcounts always equal the references held, and
// never-hashed free + cached free + used == total; at the end every block is free.
TEST(BlockManagerCacheTest, EveryBlockReturnsAfterRandomUse) {
  BlockManager m(32, On());
  std::mt19937 rng(11);
  std::vector<std::vector<BlockId>> tables(5);
  int32_t next_value = 1;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<BlockId>& t = tables[rng() % tables.size()];
    const uint32_t op = rng() % 6;
    if (op <= 1 && m.CanAllocate(1)) {
      t.push_back(m.Allocate());
      if (rng() % 2 == 0) RegisterRoot(m, t.back(), next_value++);
    } else if (op == 2) {  // a hit on some cached content
      const BlockId id = FindRoot(m, 1 + static_cast<int32_t>(rng() % next_value));
      if (id != kNullBlock) {
        m.Reuse(id);
        t.push_back(id);
      }
    } else if (op == 3 && !t.empty()) {
      m.Free(t.back());
      t.pop_back();
    } else if (op == 4) {
      m.FreeTable(t);
      t.clear();
    }
    std::vector<int32_t> refs(32, 0);
    for (const auto& table : tables) {
      for (BlockId b : table) ++refs[b];
    }
    for (BlockId b = 1; b < 32; ++b) ASSERT_EQ(m.RefCount(b), refs[b]) << "block " << b;
    ASSERT_EQ(m.NumUncachedFree() + m.NumCachedFree() + m.NumUsed(), m.NumTotal());
  }
  for (auto& t : tables) m.FreeTable(t);
  EXPECT_EQ(m.NumUsed(), 0);
  EXPECT_EQ(m.NumUncachedFree() + m.NumCachedFree(), m.NumTotal());
  EXPECT_EQ(m.NumCachedFree(), m.cache().size());
}

TEST(BlockManagerCacheDeathTest, MisuseAborts) {
  BlockManager m(4, On());
  const BlockId id = m.Allocate();
  EXPECT_DEATH(m.Reuse(id), "not in the prefix cache");
  RegisterRoot(m, id, 1);
  EXPECT_DEATH(RegisterRoot(m, id, 2), "indexed twice");
  m.Free(id);
  EXPECT_DEATH(m.Free(id), "double free");
  EXPECT_DEATH(RegisterRoot(m, 2, 3), "registering a free KV block");
  EXPECT_DEATH(PrefixCache(4, kBs, 65), "hash_bits");
}

}  // namespace
}  // namespace tessera::router
