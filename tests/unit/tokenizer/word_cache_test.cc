#include "common/tokenizer/word_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace tessera::tokenizer {
namespace {

using ::testing::ElementsAre;

TEST(WordCacheTest, MissThenHitAppends) {
  WordCache cache(100);
  std::vector<TokenId> out = {7};
  EXPECT_FALSE(cache.Lookup("hello", &out));
  const std::vector<TokenId> ids = {1, 2, 3, 4, 5};
  cache.Store("hello", ids);
  EXPECT_TRUE(cache.Lookup("hello", &out));
  EXPECT_THAT(out, ElementsAre(7, 1, 2, 3, 4, 5));
}

TEST(WordCacheTest, DisabledNeverHits) {
  WordCache cache(0);
  EXPECT_FALSE(cache.enabled());
  const std::vector<TokenId> ids = {1};
  cache.Store("a", ids);
  std::vector<TokenId> out;
  EXPECT_FALSE(cache.Lookup("a", &out));
  EXPECT_TRUE(out.empty());
}

TEST(WordCacheTest, StaysBoundedAndCorrect) {
  WordCache cache(32);
  for (TokenId i = 0; i < 10000; ++i) {
    const std::vector<TokenId> ids = {i, i + 1};
    cache.Store("w" + std::to_string(i), ids);
    std::vector<TokenId> out;
    ASSERT_TRUE(cache.Lookup("w" + std::to_string(i), &out));  // just stored: always present
    ASSERT_THAT(out, ElementsAre(i, i + 1));
  }
  int hits = 0;
  for (TokenId i = 0; i < 10000; ++i) {
    std::vector<TokenId> out;
    hits += cache.Lookup("w" + std::to_string(i), &out);
  }
  EXPECT_LE(hits, 16 * 2);  // at most one shard's capacity (2) per shard survives
}

TEST(WordCacheTest, ConcurrentUseIsSafe) {
  WordCache cache(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 5000; ++i) {
        const std::string word = "w" + std::to_string((i * 7 + t) % 200);
        std::vector<TokenId> out;
        if (cache.Lookup(word, &out)) {
          ASSERT_EQ(out.size(), 1u);
          ASSERT_EQ(out[0], static_cast<TokenId>(word.size()));
        } else {
          const std::vector<TokenId> ids = {static_cast<TokenId>(word.size())};
          cache.Store(word, ids);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace
}  // namespace tessera::tokenizer
