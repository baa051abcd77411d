#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/reference.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::AllNear;
using testing::BitEqual;
using testing::RandomVector;

struct Geometry {
  int num_heads;
  int num_kv_heads;
  int head_dim;
  int block_size;
};

// One sequence: contiguous K/V for all its positions and the queries of its last n_query tokens.
struct TestSeq {
  int context;  // positions 0..context-1 are cached
  int num_query;
  std::vector<float> k, v;  // [context, num_kv_heads, head_dim]
  std::vector<float> q;     // [num_query, num_heads, head_dim]
  std::vector<int32_t> block_table;
  int start_pos() const { return context - num_query; }
};

// A paged KV pool holding a set of sequences under shuffled, non-contiguous block ids (block 0 is
// never used, like the router's null block).
class PagedFixture {
 public:
  PagedFixture(const Geometry& g, std::vector<TestSeq>* seqs, uint64_t seed) : g_(g) {
    int64_t blocks = 1;
    for (const TestSeq& s : *seqs) blocks += (s.context + g.block_size - 1) / g.block_size + 1;
    shape_ = PagedKvShape{blocks, g.block_size, g.num_kv_heads, g.head_dim};
    k_cache_.assign(shape_.PoolElements(), NAN);  // unwritten slots must never be read
    v_cache_.assign(shape_.PoolElements(), NAN);
    k_half_.assign(shape_.PoolElements(), ToFloat16(NAN));
    v_half_.assign(shape_.PoolElements(), ToFloat16(NAN));
    std::vector<int32_t> ids(static_cast<size_t>(blocks - 1));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i + 1);
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
    size_t next = 0;
    for (TestSeq& s : *seqs) {
      const int num_blocks = (s.context + g.block_size - 1) / g.block_size;
      s.block_table.assign(ids.begin() + next, ids.begin() + next + num_blocks);
      next += num_blocks + 1;  // leave a gap
      std::vector<int64_t> slots(static_cast<size_t>(s.context));
      ComputeSlotMapping(s.block_table, g.block_size, 0, slots);
      WriteKv(shape_, slots, s.k, s.v, k_cache_, v_cache_);
      WriteKv(shape_, slots, s.k, s.v, k_half_, v_half_);
    }
  }

  // Runs PagedAttention for the given (sequence, start_pos, num_query, q rows) chunks.
  std::vector<float> Run(ThreadPool& pool, const std::vector<const TestSeq*>& seqs,
                         const std::vector<std::pair<int, int>>& chunks,  // (start, count)
                         Isa isa, bool f16_pools = false) const {
    std::vector<AttentionSequence> inputs;
    std::vector<float> q;
    int64_t row = 0;
    const size_t row_elems = static_cast<size_t>(g_.num_heads * g_.head_dim);
    for (size_t i = 0; i < seqs.size(); ++i) {
      const TestSeq& s = *seqs[i];
      const auto [start, count] = chunks[i];
      inputs.push_back({row, count, start, s.block_table});
      const size_t q_offset = static_cast<size_t>(start - s.start_pos()) * row_elems;
      q.insert(q.end(), s.q.begin() + q_offset, s.q.begin() + q_offset + count * row_elems);
      row += count;
    }
    std::vector<float> out(q.size());
    PagedAttentionParams params{g_.num_heads, 1.0f / std::sqrt(float(g_.head_dim)), shape_};
    if (f16_pools) {
      PagedAttention(pool, params, q, k_half_, v_half_, inputs, out, isa);
    } else {
      PagedAttention(pool, params, q, k_cache_, v_cache_, inputs, out, isa);
    }
    return out;
  }

 private:
  Geometry g_;
  PagedKvShape shape_;
  std::vector<float> k_cache_, v_cache_;
  std::vector<Float16> k_half_, v_half_;  // the same K/V written into f16 pools
};

// Rounds every value to the nearest f16 (what an f16 pool stores).
void RoundToHalf(std::vector<float>& values) {
  for (float& v : values) v = ToFloat(ToFloat16(v));
}

TestSeq MakeSeq(const Geometry& g, int context, int num_query, uint64_t seed) {
  TestSeq s;
  s.context = context;
  s.num_query = num_query;
  s.k = RandomVector(context * g.num_kv_heads * g.head_dim, seed, -2.0f, 2.0f);
  s.v = RandomVector(context * g.num_kv_heads * g.head_dim, seed + 1);
  s.q = RandomVector(num_query * g.num_heads * g.head_dim, seed + 2, -2.0f, 2.0f);
  return s;
}

std::vector<float> Reference(const Geometry& g, const TestSeq& s) {
  std::vector<float> out(s.q.size());
  reference::Attention(s.q, s.k, s.v, s.num_query, s.start_pos(), g.num_heads, g.num_kv_heads,
                       g.head_dim, 1.0f / std::sqrt(float(g.head_dim)), out);
  return out;
}

class CpuPagedAttentionTest : public ::testing::TestWithParam<Isa> {};

TEST_P(CpuPagedAttentionTest, MatchesContiguousReference) {
  ThreadPool pool(2);
  // SmolLM2's 9/3 heads; block size 1; MHA with an odd head_dim; MQA; head_dim > 64 not a
  // multiple of 16; GQA groups split for the grouped kernels (7 -> 4 + 3; head_dim 128:
  // 4 -> 2 + 2).
  const Geometry geometries[] = {{9, 3, 64, 16}, {9, 3, 64, 1},  {4, 4, 24, 5},  {8, 1, 16, 16},
                                 {2, 2, 100, 3}, {14, 2, 64, 16}, {8, 2, 128, 7}};
  uint64_t seed = 1;
  for (const Geometry& g : geometries) {
    for (int batch : {1, 3, 17}) {
      std::vector<TestSeq> seqs;
      const int lengths[] = {1, 15, 16, 17, 97};
      for (int b = 0; b < batch; ++b) {
        const int context = lengths[(b + batch) % 5];
        const int num_query = b % 2 == 0 ? context : 1;  // prefill and decode rows mixed
        seqs.push_back(MakeSeq(g, context, num_query, seed += 3));
      }
      PagedFixture fixture(g, &seqs, seed);
      std::vector<const TestSeq*> ptrs;
      std::vector<std::pair<int, int>> chunks;
      for (const TestSeq& s : seqs) {
        ptrs.push_back(&s);
        chunks.push_back({s.start_pos(), s.num_query});
      }
      const std::vector<float> out = fixture.Run(pool, ptrs, chunks, GetParam());
      size_t offset = 0;
      for (const TestSeq& s : seqs) {
        const std::vector<float> ref = Reference(g, s);
        ASSERT_TRUE(AllNear({out.data() + offset, ref.size()}, ref, 2e-5, 1e-4))
            << "heads " << g.num_heads << "/" << g.num_kv_heads << " dim " << g.head_dim
            << " block " << g.block_size << " batch " << batch << " context " << s.context;
        offset += ref.size();
      }
    }
  }
}

// A prompt's outputs must not depend on how it was chunked (DESIGN.md §6).
TEST_P(CpuPagedAttentionTest, ChunkedPrefillIsBitIdenticalToOneShot) {
  ThreadPool pool(2);
  for (int block_size : {1, 16}) {
    const Geometry g{9, 3, 64, block_size};
    std::vector<TestSeq> seqs = {MakeSeq(g, 97, 97, 77)};
    PagedFixture fixture(g, &seqs, 5);
    const std::vector<float> one_shot = fixture.Run(pool, {&seqs[0]}, {{0, 97}}, GetParam());
    for (int chunk : {1, 7, 16, 96}) {
      std::vector<float> chunked;
      for (int start = 0; start < 97; start += chunk) {
        const int count = std::min(chunk, 97 - start);
        const auto part = fixture.Run(pool, {&seqs[0]}, {{start, count}}, GetParam());
        chunked.insert(chunked.end(), part.begin(), part.end());
      }
      ASSERT_TRUE(BitEqual(chunked, one_shot)) << "chunk " << chunk << " block " << block_size;
    }
  }
}

// A sequence's outputs must not depend on the other sequences in the batch or the thread count.
TEST_P(CpuPagedAttentionTest, BatchInvariantBitExact) {
  const Geometry g{9, 3, 64, 16};
  std::vector<TestSeq> seqs;
  for (int b = 0; b < 17; ++b) {
    seqs.push_back(MakeSeq(g, 5 + 13 * b, b % 3 == 0 ? 5 : 1, 300 + b));  // prefill chunk or decode
  }
  PagedFixture fixture(g, &seqs, 9);
  ThreadPool single(1);
  std::vector<std::vector<float>> alone;
  for (const TestSeq& s : seqs) {
    alone.push_back(fixture.Run(single, {&s}, {{s.start_pos(), s.num_query}}, GetParam()));
  }
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int batch : {2, 5, 17}) {
      std::vector<const TestSeq*> ptrs;
      std::vector<std::pair<int, int>> chunks;
      std::vector<int> order;
      for (int b = 0; b < batch; ++b) order.push_back((b * 7 + batch) % 17);
      std::sort(order.begin(), order.end());
      order.erase(std::unique(order.begin(), order.end()), order.end());
      for (int b : order) {
        ptrs.push_back(&seqs[b]);
        chunks.push_back({seqs[b].start_pos(), seqs[b].num_query});
      }
      const std::vector<float> out = fixture.Run(pool, ptrs, chunks, GetParam());
      size_t offset = 0;
      for (int b : order) {
        ASSERT_TRUE(BitEqual({out.data() + offset, alone[b].size()}, alone[b]))
            << "threads " << threads << " batch " << batch << " seq " << b;
        offset += alone[b].size();
      }
    }
  }
}

// f16 pools change only the stored values: on K/V that f16 represents exactly, attention over f16
// pools is bit-identical to attention over f32 pools, prefill and decode rows, awkward head dims.
TEST_P(CpuPagedAttentionTest, F16PoolsEqualF32PoolsOfTheSameValuesBitForBit) {
  ThreadPool pool(2);
  const Geometry geometries[] = {{9, 3, 64, 16}, {9, 3, 64, 1}, {4, 4, 24, 5}, {2, 2, 100, 3},
                                 {8, 2, 128, 7}};
  uint64_t seed = 900;
  for (const Geometry& g : geometries) {
    std::vector<TestSeq> seqs = {MakeSeq(g, 17, 17, seed += 3), MakeSeq(g, 97, 1, seed += 3),
                                 MakeSeq(g, 1, 1, seed += 3)};
    for (TestSeq& s : seqs) {
      RoundToHalf(s.k);
      RoundToHalf(s.v);
    }
    PagedFixture fixture(g, &seqs, seed);
    const std::vector<const TestSeq*> ptrs = {&seqs[0], &seqs[1], &seqs[2]};
    const std::vector<std::pair<int, int>> chunks = {{0, 17}, {96, 1}, {0, 1}};
    EXPECT_TRUE(BitEqual(fixture.Run(pool, ptrs, chunks, GetParam(), /*f16_pools=*/true),
                         fixture.Run(pool, ptrs, chunks, GetParam(), /*f16_pools=*/false)))
        << "heads " << g.num_heads << "/" << g.num_kv_heads << " dim " << g.head_dim;
  }
}

// On unrounded K/V, f16 pools stay close to the exact contiguous reference (the rounding of
// K and V, 2^-11 relative, is the only difference).
TEST_P(CpuPagedAttentionTest, F16PoolsStayCloseToTheReference) {
  ThreadPool pool(2);
  const Geometry g{9, 3, 64, 16};
  std::vector<TestSeq> seqs = {MakeSeq(g, 97, 97, 41), MakeSeq(g, 33, 1, 42)};
  PagedFixture fixture(g, &seqs, 43);
  const std::vector<float> out =
      fixture.Run(pool, {&seqs[0], &seqs[1]}, {{0, 97}, {32, 1}}, GetParam(), true);
  size_t offset = 0;
  for (const TestSeq& s : seqs) {
    const std::vector<float> ref = Reference(g, s);
    EXPECT_TRUE(AllNear({out.data() + offset, ref.size()}, ref, 5e-3, 5e-3)) << s.context;
    offset += ref.size();
  }
}

TEST(CpuKvCacheTest, WriteKvToF16RoundsToNearest) {
  const PagedKvShape shape{2, 1, 1, 16};
  const std::vector<float> k = RandomVector(16, 3, -100.0f, 100.0f);
  const std::vector<float> v = RandomVector(16, 4);
  std::vector<Float16> k_pool(shape.PoolElements()), v_pool(shape.PoolElements());
  WriteKv(shape, std::vector<int64_t>{1}, k, v, k_pool, v_pool);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(k_pool[16 + i].bits, util::FloatToHalf(k[i]));
    EXPECT_EQ(v_pool[16 + i].bits, util::FloatToHalf(v[i]));
    EXPECT_NEAR(ToFloat(k_pool[16 + i]), k[i], std::abs(k[i]) * 1e-3);
  }
  EXPECT_EQ(k_pool[0].bits, 0);  // slot 0 untouched
}

TEST(CpuPagedAttentionIsaTest, Avx2AndAvx512AreBitIdentical) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool(2);
  for (int head_dim : {64, 24}) {
    const Geometry g{6, 2, head_dim, 16};
    std::vector<TestSeq> seqs = {MakeSeq(g, 41, 41, 1), MakeSeq(g, 97, 1, 2)};
    PagedFixture fixture(g, &seqs, 3);
    const auto a = fixture.Run(pool, {&seqs[0], &seqs[1]}, {{0, 41}, {96, 1}}, Isa::kAvx2);
    const auto b = fixture.Run(pool, {&seqs[0], &seqs[1]}, {{0, 41}, {96, 1}}, Isa::kAvx512);
    EXPECT_TRUE(BitEqual(a, b)) << head_dim;
  }
}

TEST(CpuKvCacheTest, SlotMappingFollowsBlockTable) {
  const std::vector<int32_t> table = {7, 2, 9};
  std::vector<int64_t> slots(5);
  ComputeSlotMapping(table, 4, 6, slots);  // positions 6..10
  EXPECT_EQ(slots, (std::vector<int64_t>{2 * 4 + 2, 2 * 4 + 3, 9 * 4 + 0, 9 * 4 + 1, 9 * 4 + 2}));
}

TEST(CpuKvCacheTest, WriteKvSkipsPaddingSlots) {
  const PagedKvShape shape{3, 2, 1, 2};
  std::vector<float> k_cache(shape.PoolElements(), 0.0f), v_cache = k_cache;
  const std::vector<float> k = {1, 2, 3, 4}, v = {5, 6, 7, 8};
  const std::vector<int64_t> slots = {5, -1};
  WriteKv(shape, slots, k, v, k_cache, v_cache);
  EXPECT_EQ(k_cache, (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2}));
  EXPECT_EQ(v_cache, (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 6}));
}

TEST(CpuKvCacheDeathTest, RejectsOutOfRangeSlot) {
  const PagedKvShape shape{2, 2, 1, 2};
  std::vector<float> k_cache(shape.PoolElements()), v_cache(shape.PoolElements());
  const std::vector<float> k = {1, 2}, v = {3, 4};
  const std::vector<int64_t> slots = {4};
  EXPECT_DEATH(WriteKv(shape, slots, k, v, k_cache, v_cache), "slot out of range");
}

TEST(CpuPagedAttentionDeathTest, RejectsShortBlockTable) {
  ThreadPool pool(1);
  const PagedKvShape shape{4, 4, 1, 16};
  std::vector<float> cache(shape.PoolElements()), q(16), out(16);
  const std::vector<int32_t> table = {1};
  const std::vector<AttentionSequence> seqs = {{0, 1, 4, table}};  // position 4 needs 2 blocks
  PagedAttentionParams params{1, 0.25f, shape};
  EXPECT_DEATH(PagedAttention(pool, params, q, cache, cache, seqs, out),
               "block table does not cover");
}

INSTANTIATE_TEST_SUITE_P(CpuIsas, CpuPagedAttentionTest, ::testing::ValuesIn(SupportedIsas()),
                         testing::IsaParamName);

}  // namespace
}  // namespace tessera::kernels::cpu
