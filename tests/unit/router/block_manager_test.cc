// BlockManager: exact ids, refcounts, every block returns, broken invariants abort.
#include "router/block_manager.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::router {
namespace {

TEST(BlockManagerTest, FreshPoolHandsOutIdsFromOneAndNeverTheNullBlock) {
  BlockManager m(5);
  EXPECT_EQ(m.NumTotal(), 4);
  EXPECT_EQ(m.NumFree(), 4);
  EXPECT_EQ(m.NumUsed(), 0);
  std::vector<BlockId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(m.Allocate());
  EXPECT_EQ(ids, (std::vector<BlockId>{1, 2, 3, 4}));
  EXPECT_EQ(m.NumFree(), 0);
  EXPECT_EQ(m.NumUsed(), 4);
  EXPECT_FALSE(m.CanAllocate(1));
  EXPECT_TRUE(m.CanAllocate(0));
  for (BlockId id : ids) EXPECT_EQ(m.RefCount(id), 1);
}

TEST(BlockManagerTest, OnlyTheNullBlockMeansNoUsableBlock) {
  BlockManager m(1);
  EXPECT_EQ(m.NumTotal(), 0);
  EXPECT_FALSE(m.CanAllocate(1));
}

TEST(BlockManagerTest, FreedBlockIsHandedOutNext) {
  BlockManager m(8);
  EXPECT_EQ(m.Allocate(), 1);
  EXPECT_EQ(m.Allocate(), 2);
  EXPECT_EQ(m.Allocate(), 3);
  m.Free(2);
  EXPECT_EQ(m.RefCount(2), 0);
  EXPECT_EQ(m.Allocate(), 2);
  EXPECT_EQ(m.Allocate(), 4);
}

TEST(BlockManagerTest, FreeTableGivesTheSameIdsBackInTableOrder) {
  BlockManager m(8);
  const std::vector<BlockId> table = {m.Allocate(), m.Allocate(), m.Allocate()};
  ASSERT_EQ(table, (std::vector<BlockId>{1, 2, 3}));
  m.FreeTable(table);
  EXPECT_EQ(m.NumUsed(), 0);
  EXPECT_EQ((std::vector<BlockId>{m.Allocate(), m.Allocate(), m.Allocate()}), table);
}

TEST(BlockManagerTest, SharedBlockReturnsOnlyAfterItsLastReference) {
  BlockManager m(4);
  const BlockId id = m.Allocate();
  m.AddRef(id);
  m.AddRef(id);
  EXPECT_EQ(m.RefCount(id), 3);
  m.Free(id);
  m.Free(id);
  EXPECT_EQ(m.RefCount(id), 1);
  EXPECT_EQ(m.NumUsed(), 1);
  m.Free(id);
  EXPECT_EQ(m.RefCount(id), 0);
  EXPECT_EQ(m.NumUsed(), 0);
  EXPECT_EQ(m.NumFree(), 3);
}

TEST(BlockManagerTest, BlocksForRoundsUp) {
  EXPECT_EQ(BlockManager::BlocksFor(0, 16), 0);
  EXPECT_EQ(BlockManager::BlocksFor(1, 16), 1);
  EXPECT_EQ(BlockManager::BlocksFor(16, 16), 1);
  EXPECT_EQ(BlockManager::BlocksFor(17, 16), 2);
  EXPECT_EQ(BlockManager::BlocksFor(5, 1), 5);
}

// Random tables grow, get shared and are freed; every block comes back and no count goes wrong.
TEST(BlockManagerTest, EveryBlockReturnsAfterRandomUse) {
  BlockManager m(64);
  std::mt19937 rng(7);
  std::vector<std::vector<BlockId>> tables(6);
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<BlockId>& t = tables[rng() % tables.size()];
    switch (rng() % 4) {
      case 0:
      case 1:
        if (m.CanAllocate(1)) t.push_back(m.Allocate());
        break;
      case 2: {  // share another table's last block
        const std::vector<BlockId>& other = tables[rng() % tables.size()];
        if (!other.empty() && &other != &t) {
          m.AddRef(other.back());
          t.push_back(other.back());
        }
        break;
      }
      default:
        m.FreeTable(t);
        t.clear();
    }
    int64_t refs = 0;
    for (const auto& table : tables) refs += static_cast<int64_t>(table.size());
    int64_t counted = 0;
    for (BlockId id = 1; id < 64; ++id) counted += m.RefCount(id);
    ASSERT_EQ(counted, refs);
    ASSERT_EQ(m.NumFree() + m.NumUsed(), m.NumTotal());
  }
  for (auto& t : tables) m.FreeTable(t);
  EXPECT_EQ(m.NumFree(), 63);
  EXPECT_EQ(m.NumUsed(), 0);
}

TEST(BlockManagerDeathTest, DoubleFreeAborts) {
  BlockManager m(4);
  const BlockId id = m.Allocate();
  m.Free(id);
  EXPECT_DEATH(m.Free(id), "double free");
}

TEST(BlockManagerDeathTest, FreeingASharedBlockOnceTooOftenAborts) {
  BlockManager m(4);
  const BlockId id = m.Allocate();
  m.AddRef(id);
  m.Free(id);
  m.Free(id);
  EXPECT_DEATH(m.Free(id), "refcount would go negative");
}

TEST(BlockManagerDeathTest, NullAndOutOfRangeBlocksAbort) {
  BlockManager m(4);
  EXPECT_DEATH(m.Free(kNullBlock), "null block");
  EXPECT_DEATH(m.Free(4), "out of range");
  EXPECT_DEATH(m.AddRef(-1), "out of range");
}

TEST(BlockManagerDeathTest, AllocateFromAnEmptyPoolAborts) {
  BlockManager m(2);
  m.Allocate();
  EXPECT_DEATH(m.Allocate(), "no free KV block");
}

TEST(BlockManagerDeathTest, SharingAFreeBlockAborts) {
  BlockManager m(4);
  EXPECT_DEATH(m.AddRef(1), "AddRef on a free KV block");
}

}  // namespace
}  // namespace tessera::router
