// Paged decode attention CUDA kernel on the emulator vs the contiguous-KV f64 CPU reference
// (reference::Attention, one query at position context - 1), under every test schedule.
// Combinations (not the full cross product, to stay well under 30 s): each case below mixes
// one dtype (bf16 / f16 / f32), head dim (64 / 128; 256 / 80 / 96 / 32 in their own tests),
// block size (1 / 7 / 16), GQA ratio (1 / 3 / 8, and 16 = two head chunks), batch (1 / 3 / 17,
// ragged lengths from 1, 15, 16, 17, 97 and 0 = padding row) and partitioning: one partition
// (forced as large as the context: many cp.async stages, a short last one; or the heuristic on
// a context of one span), split forced small (16, 32, 37 and 5, partitions that are not a
// multiple of the block size or of a stage), split by the heuristic (per-sequence spans);
// max_context_len far above every context (a graph captured at the model's length). Block
// tables are shuffled. Tolerance: paged_attention_test_util.h.
// Also the runner's two structural facts, bit for bit: batch invariance under a forced partition
// size (a sequence's output whatever the batch, its row, max_context_len, split or not), and
// inert padding rows (context 0: zeros, no pool/q/table reads, no effect on other rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/cuda/paged_decode_attention.cuh"
#include "tests/unit/cuda/kernel_test_env.h"
#include "tests/unit/cuda/paged_attention_test_util.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

struct DecodeCase {
  int block_size;
  int num_kv_heads;
  int group;  // query heads per KV head
  std::vector<int> contexts;
  int partition_size;  // 0: the launch's heuristic
  bool expect_split;
};

// Runs the kernel on `kv` twice over one workspace (the arrival counters zero before the first
// launch) and returns the output, checking that both launches agree bit for bit and leave the
// counters zero.
template <typename T, int kHeadDim>
std::vector<T> RunDecode(const simt::Schedule& schedule, const PagedDecodeParams& params,
                         const std::vector<T>& q, const simt::PagedKv<T>& kv,
                         const std::vector<int32_t>& contexts) {
  DeviceBuffer<T> d_q{std::span<const T>(q)}, d_k{std::span<const T>(kv.k_pool)},
      d_v{std::span<const T>(kv.v_pool)}, d_out(q.size());
  DeviceBuffer<int32_t> d_tables{std::span<const int32_t>(kv.block_tables)},
      d_contexts{std::span<const int32_t>(contexts)};
  const size_t workspace_floats = PagedDecodeWorkspaceFloats(params, kHeadDim);
  DeviceBuffer<float> d_workspace(std::max<size_t>(workspace_floats, 1));
  const size_t arrival_words = workspace_floats > 0 ? DecodeArrivalWords(params) : 0;
  auto* arrivals = reinterpret_cast<uint32_t*>(d_workspace.get());
  std::fill_n(arrivals, arrival_words, 0u);
  std::vector<T> first;
  for (int run = 0; run < 2; ++run) {
    for (size_t i = 0; i < q.size(); ++i) d_out[i] = simt::FloatTo<T>(7.0f);  // overwritten
    simt::TestLauncher launcher(schedule);
    const auto status = LaunchPagedDecodeAttention<simt::TestLauncher, T, kHeadDim>(
        launcher, params, d_q.get(), d_k.get(), d_v.get(), d_tables.get(), d_contexts.get(),
        d_out.get(), workspace_floats > 0 ? d_workspace.get() : nullptr);
    EXPECT_TRUE(status.ok()) << status;
    for (size_t i = 0; i < arrival_words; ++i) EXPECT_EQ(arrivals[i], 0u) << "counter " << i;
    if (run == 0) first = d_out.ToHost();
  }
  const std::vector<T> second = d_out.ToHost();
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(T)), 0)
      << "a second launch over the same workspace differs";
  return second;
}

// max_context_len: 0 for the longest context, else the launch's (larger) value, as a CUDA graph
// captured at the model's context length passes it.
template <typename T, int kHeadDim>
void CheckDecode(const simt::Schedule& schedule, const DecodeCase& c, std::mt19937& rng,
                 int max_context_len = 0) {
  const int num_seqs = int(c.contexts.size());
  const int num_heads = c.num_kv_heads * c.group;
  const simt::PagedKv<T> kv(c.contexts, c.block_size, c.num_kv_heads, kHeadDim, rng);
  const std::vector<T> q =
      simt::Convert<T>(simt::RandomFloats(size_t(num_seqs) * num_heads * kHeadDim, rng, -2, 2));
  PagedDecodeParams params;
  params.num_seqs = num_seqs;
  params.num_heads = num_heads;
  params.num_kv_heads = c.num_kv_heads;
  params.block_size = c.block_size;
  params.max_blocks_per_seq = kv.max_blocks_per_seq;
  params.max_context_len = max_context_len > 0
                              ? max_context_len
                              : *std::max_element(c.contexts.begin(), c.contexts.end());
  params.scale = 1.0f / std::sqrt(float(kHeadDim));
  params.partition_size = c.partition_size;
  ASSERT_EQ(PlanPagedDecode(params).num_partitions > 1, c.expect_split);
  const std::vector<int32_t> contexts(c.contexts.begin(), c.contexts.end());
  const std::vector<T> got = RunDecode<T, kHeadDim>(schedule, params, q, kv, contexts);

  // Paged = contiguous: the same K/V in consecutive blocks give the same bits.
  const std::vector<T> repacked = RunDecode<T, kHeadDim>(schedule, params, q, kv.Repacked(),
                                                         contexts);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(simt::Bits(got[i]), simt::Bits(repacked[i])) << "element " << i;
  }

  const std::vector<float> q_floats = simt::ToFloats<T>(q);
  const size_t row = size_t(num_heads) * kHeadDim;
  for (int s = 0; s < num_seqs; ++s) {
    const int context = c.contexts[s];
    std::vector<float> expected(row, 0.0f);  // a padding row (context 0) reads as zeros
    if (context > 0) {
      kernels::cpu::reference::Attention(
          std::span<const float>(q_floats).subspan(s * row, row), kv.Contiguous(kv.k_pool, s, context),
          kv.Contiguous(kv.v_pool, s, context), 1, context - 1, num_heads, c.num_kv_heads,
          kHeadDim, params.scale, expected);
    }
    for (size_t i = 0; i < row; ++i) {
      ASSERT_NEAR(simt::AsFloat(got[s * row + i]), expected[i],
                  simt::AttentionTolerance<T>(expected[i]))
          << "seq " << s << " context " << context << " head " << i / kHeadDim << " dim "
          << i % kHeadDim << " block_size " << c.block_size << " group " << c.group
          << " partition " << c.partition_size;
    }
  }
}

class PagedDecodeAttentionKernelTest : public simt::KernelTest {};

TEST_P(PagedDecodeAttentionKernelTest, UnsplitMatchesContiguousReference) {
  // One partition forced as large as the context (several pipeline stages, the last one short),
  // and the heuristic on contexts of at most one span.
  std::mt19937 rng(2024);
  CheckDecode<__nv_bfloat16, 128>(GetParam(), {16, 1, 8, {97}, 4096, false}, rng);
  CheckDecode<__half, 64>(GetParam(), {16, 2, 8, {16, 0, 15}, 0, false}, rng);
  CheckDecode<__nv_bfloat16, 64>(GetParam(), {1, 1, 3, {17, 1, 97, 16, 15}, 4096, false}, rng);
  CheckDecode<__half, 128>(GetParam(), {1, 2, 1, {15, 97, 1}, 4096, false}, rng);
  CheckDecode<float, 64>(GetParam(), {16, 2, 3, {17, 0, 97}, 4096, false}, rng);
  CheckDecode<float, 128>(GetParam(), {1, 1, 8, {33}, 0, false}, rng);
}

TEST_P(PagedDecodeAttentionKernelTest, SplitMatchesContiguousReference) {
  std::mt19937 rng(99);
  CheckDecode<__nv_bfloat16, 64>(GetParam(), {1, 2, 3, {1, 17, 97}, 16, true}, rng);
  CheckDecode<__half, 128>(GetParam(),
                           {16, 3, 1, {97, 1, 15, 16, 17, 0, 97, 33, 2, 16, 64, 5, 96, 17, 1, 80, 31},
                            32, true},
                           rng);
  CheckDecode<__nv_bfloat16, 128>(GetParam(), {16, 1, 8, {97, 16, 0}, 5, true}, rng);
  CheckDecode<__half, 64>(GetParam(), {16, 1, 16, {97}, 17, true}, rng);  // two head chunks
  CheckDecode<float, 128>(GetParam(), {16, 2, 3, {97, 0, 40}, 32, true}, rng);
  CheckDecode<float, 64>(GetParam(), {1, 1, 16, {50, 17}, 16, true}, rng);
}

// A CUDA graph captured at the model's context length launches with max_context_len far above
// every context: the grid has partitions no sequence reaches (they exit), the combine merges
// only the used ones.
TEST_P(PagedDecodeAttentionKernelTest, MaxContextLenFarAboveEveryContext) {
  std::mt19937 rng(7);
  CheckDecode<__nv_bfloat16, 64>(GetParam(), {16, 2, 4, {5, 0, 300, 37}, 0, true}, rng, 4096);
  CheckDecode<float, 128>(GetParam(), {16, 1, 8, {45, 1}, 0, true}, rng, 8192);
  // The runner's batch-invariant mode: a forced partition size, still far below the maximum.
  CheckDecode<__nv_bfloat16, 128>(GetParam(), {16, 1, 2, {700, 0, 3}, 512, true}, rng, 4096);
}

TEST_P(PagedDecodeAttentionKernelTest, HeuristicSplitMatchesContiguousReference) {
  std::mt19937 rng(5);
  CheckDecode<__nv_bfloat16, 64>(GetParam(), {16, 1, 1, {600, 3}, 0, true}, rng);
}

// GQA 8 over 256-token contexts split 1, 2 and 7 ways (forced 256, 128, 37: a last partition of
// 34 keys), at head_dims 256 (16-key stages) and 128 (32-key stages), with a ragged neighbour.
TEST_P(PagedDecodeAttentionKernelTest, Gqa8ContextsOf256SplitOneTwoAndSevenWays) {
  std::mt19937 rng(256);
  CheckDecode<__nv_bfloat16, 256>(GetParam(), {16, 1, 8, {256, 250}, 256, false}, rng);
  CheckDecode<__nv_bfloat16, 256>(GetParam(), {16, 1, 8, {256, 129}, 128, true}, rng);
  CheckDecode<__nv_bfloat16, 256>(GetParam(), {16, 1, 8, {256, 40}, 37, true}, rng);
  CheckDecode<__half, 128>(GetParam(), {7, 2, 8, {256, 0}, 37, true}, rng);
  CheckDecode<float, 128>(GetParam(), {16, 1, 8, {256, 255}, 128, true}, rng);
}

TEST(PagedDecodePlanTest, PartitionHeuristic) {
  PagedDecodeParams params;
  params.num_heads = 32;
  params.num_kv_heads = 8;
  params.num_sms = 132;
  // One sequence: 8 blocks, 528 wanted -> 66 partitions, capped by 4096 / 64 = 64; each
  // sequence then cuts its own context into spans of 64.
  params.num_seqs = 1;
  params.max_context_len = 4096;
  DecodePartitioning plan = PlanPagedDecode(params);
  EXPECT_EQ(plan.partition_size, 0);
  EXPECT_EQ(plan.num_partitions, 64);
  EXPECT_EQ(DecodeSpan(4096, plan), 64);
  EXPECT_EQ(DecodeSpan(4000, plan), 64);  // ceil(4000 / 64) = 63 partitions used
  EXPECT_EQ(DecodeSpan(1, plan), 64);
  // A graph captured at the model's context: the partition count comes from the rows, and a
  // 512-token context still spreads over 8 partitions (not one partition of 1,024 keys).
  params.max_context_len = 131072;
  plan = PlanPagedDecode(params);
  EXPECT_EQ(plan.num_partitions, 66);
  EXPECT_EQ(DecodeSpan(512, plan), 64);
  EXPECT_EQ(DecodeSpan(131072, plan), 2048);  // ceil(131072 / 66) = 1986 -> 32 x 64
  EXPECT_EQ(PagedDecodeWorkspaceFloats(params, 128), 8 + size_t(1) * 32 * 66 * 130);  // 8 counters
  // Many sequences fill the GPU already: no split, whatever the context.
  params.num_seqs = 66;
  EXPECT_EQ(PlanPagedDecode(params).num_partitions, 1);
  EXPECT_EQ(PagedDecodeWorkspaceFloats(params, 128), 0u);
  params.num_seqs = 33;
  EXPECT_EQ(PlanPagedDecode(params).num_partitions, 2);
  // Short contexts never split.
  params.num_seqs = 1;
  params.max_context_len = 64;
  EXPECT_EQ(PlanPagedDecode(params).num_partitions, 1);
  // A forced partition size wins, at fixed positions.
  params.partition_size = 16;
  params.max_context_len = 200;
  plan = PlanPagedDecode(params);
  EXPECT_EQ(plan.num_partitions, 13);
  EXPECT_EQ(DecodeSpan(7, plan), 16);
  EXPECT_EQ(PagedDecodeWorkspaceFloats(params, 64), 8 + size_t(1) * 32 * 13 * 66);
  // The counters stay where the largest launch sharing the workspace puts them.
  params.max_num_seqs = 5;
  EXPECT_EQ(DecodeArrivalWords(params), 40u);
  EXPECT_EQ(PagedDecodeWorkspaceFloats(params, 64), 40 + size_t(1) * 32 * 13 * 66);
}

// Runs the sequences `seqs` of `kv` (rows of its tables and of q, in that order) in one launch.
template <typename T, int kHeadDim>
std::vector<T> RunSubset(const simt::Schedule& schedule, const simt::PagedKv<T>& kv,
                         const std::vector<T>& q, int num_heads, const std::vector<int>& seqs,
                         int max_context_len, int partition_size) {
  simt::PagedKv<T> sub = kv;  // the same pools
  sub.block_tables.clear();
  sub.lengths.clear();
  std::vector<T> sub_q;
  const size_t row = size_t(num_heads) * kHeadDim;
  for (int s : seqs) {
    const auto table = kv.block_tables.begin() + size_t(s) * kv.max_blocks_per_seq;
    sub.block_tables.insert(sub.block_tables.end(), table, table + kv.max_blocks_per_seq);
    sub.lengths.push_back(kv.lengths[s]);
    sub_q.insert(sub_q.end(), q.begin() + s * row, q.begin() + (s + 1) * row);
  }
  PagedDecodeParams params;
  params.num_seqs = int(seqs.size());
  params.num_heads = num_heads;
  params.num_kv_heads = kv.num_kv_heads;
  params.block_size = kv.block_size;
  params.max_blocks_per_seq = kv.max_blocks_per_seq;
  params.max_context_len = max_context_len;
  params.scale = 1.0f / std::sqrt(float(kHeadDim));
  params.partition_size = partition_size;
  const std::vector<int32_t> contexts(sub.lengths.begin(), sub.lengths.end());
  return RunDecode<T, kHeadDim>(schedule, params, sub_q, sub, contexts);
}

// Sequence `s`'s output rows in `got` (a run of `seqs`) equal its rows in `reference` (a run of
// 0 .. n-1), bit for bit.
template <typename T>
void ExpectSameRows(const std::vector<T>& got, const std::vector<int>& seqs,
                    const std::vector<T>& reference, size_t row, const char* what) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (size_t e = 0; e < row; ++e) {
      ASSERT_EQ(simt::Bits(got[i * row + e]), simt::Bits(reference[seqs[i] * row + e]))
          << what << ": seq " << seqs[i] << " (row " << i << ") element " << e;
    }
  }
}

// Batch-invariant mode: partition size forced to 512. Contexts straddle it (1 partition, exactly
// 512, 513 = a 1-key second partition, 2 partitions); every sequence's bits must not change with
// the batch's composition and order, max_context_len (split or unsplit launch) or its row.
template <typename T, int kHeadDim>
void CheckBatchInvariance(const simt::Schedule& schedule, const std::vector<int>& contexts,
                          std::mt19937& rng) {
  constexpr int kPartition = 512, kKvHeads = 1, kGroup = 4, kHeads = kKvHeads * kGroup;
  const simt::PagedKv<T> kv(contexts, 16, kKvHeads, kHeadDim, rng);
  const std::vector<T> q =
      simt::Convert<T>(simt::RandomFloats(contexts.size() * kHeads * kHeadDim, rng, -2, 2));
  const size_t row = size_t(kHeads) * kHeadDim;
  std::vector<int> all(contexts.size());
  std::iota(all.begin(), all.end(), 0);
  const std::vector<T> batched = RunSubset<T, kHeadDim>(schedule, kv, q, kHeads, all, 4096,
                                                        kPartition);
  const std::vector<int> reversed(all.rbegin(), all.rend());
  const int longest = *std::max_element(contexts.begin(), contexts.end());
  ExpectSameRows(RunSubset<T, kHeadDim>(schedule, kv, q, kHeads, reversed, longest, kPartition),
                 reversed, batched, row, "reversed batch, max = longest");
  for (int s : all) {  // alone, max_context_len = its own context (unsplit when it fits)
    if (contexts[s] == 0) continue;
    ExpectSameRows(RunSubset<T, kHeadDim>(schedule, kv, q, kHeads, {s}, contexts[s], kPartition),
                   {s}, batched, row, "alone");
  }
}

TEST_P(PagedDecodeAttentionKernelTest, ForcedPartitionIsBatchInvariant) {
  std::mt19937 rng(11);
  CheckBatchInvariance<__nv_bfloat16, 128>(GetParam(), {700, 300, 1, 513, 512, 0}, rng);
  CheckBatchInvariance<float, 64>(GetParam(), {600, 0, 100}, rng);
}

// Padding rows (context 0) among real ones: their q is NaN and their block tables point far
// outside the pools, so a read of either would show (NaN output or a fault). They must write
// +0.0 and leave the other rows bit-identical to a batch without them; split and unsplit.
template <typename T, int kHeadDim>
void CheckPaddingRows(const simt::Schedule& schedule, int max_context_len, int partition_size,
                      std::mt19937& rng) {
  constexpr int kKvHeads = 2, kGroup = 2, kHeads = kKvHeads * kGroup;
  const std::vector<int> contexts = {0, 45, 0, 20, 0};
  simt::PagedKv<T> kv(contexts, 16, kKvHeads, kHeadDim, rng);
  const size_t row = size_t(kHeads) * kHeadDim;
  std::vector<T> q =
      simt::Convert<T>(simt::RandomFloats(contexts.size() * row, rng, -2, 2));
  for (size_t s = 0; s < contexts.size(); ++s) {
    if (contexts[s] != 0) continue;
    std::fill_n(q.begin() + s * row, row, simt::FloatTo<T>(NAN));
    std::fill_n(kv.block_tables.begin() + s * kv.max_blocks_per_seq, kv.max_blocks_per_seq,
                std::numeric_limits<int32_t>::max());
  }
  const std::vector<T> got =
      RunSubset<T, kHeadDim>(schedule, kv, q, kHeads, {0, 1, 2, 3, 4}, max_context_len,
                             partition_size);
  for (int s : {0, 2, 4}) {
    for (size_t e = 0; e < row; ++e) {
      ASSERT_EQ(simt::Bits(got[s * row + e]), 0u) << "padding seq " << s << " element " << e;
    }
  }
  const std::vector<T> without =
      RunSubset<T, kHeadDim>(schedule, kv, q, kHeads, {1, 3}, max_context_len, partition_size);
  for (size_t e = 0; e < 2 * row; ++e) {
    const size_t at = (e < row ? 1 : 3) * row + e % row;
    ASSERT_EQ(simt::Bits(got[at]), simt::Bits(without[e])) << "element " << e;
  }
}

TEST_P(PagedDecodeAttentionKernelTest, PaddingRowsAreInert) {
  std::mt19937 rng(12);
  CheckPaddingRows<__nv_bfloat16, 64>(GetParam(), 45, 0, rng);      // unsplit
  CheckPaddingRows<__nv_bfloat16, 64>(GetParam(), 4096, 0, rng);    // split, heuristic
  CheckPaddingRows<float, 128>(GetParam(), 45, 16, rng);            // split, forced
}

// Head dims 256 (Qwen3-Next / Qwen3.5 full attention: 32 lanes per key, one P·V slice, q and
// the slices sharing shared memory), 80 and 96 (16 lanes per key with 10 / 12 loading; 3 / 2
// P·V slices with idle threads): unsplit, forced splits, the heuristic split at context 1100
// (partitions of 1024: 8 heads x 4 KiB of scores, the 48 KiB limit at 256), two head chunks,
// padding rows; batch invariance and inert padding at these dims too.
TEST_P(PagedDecodeAttentionKernelTest, HeadDims256And80And96MatchContiguousReference) {
  std::mt19937 rng(2025);
  CheckDecode<__nv_bfloat16, 256>(GetParam(), {16, 2, 8, {97, 0, 15}, 0, true}, rng);
  CheckDecode<__nv_bfloat16, 256>(GetParam(), {16, 1, 8, {1100, 3}, 0, true}, rng);
  CheckDecode<__half, 256>(GetParam(), {1, 1, 3, {17, 1, 33}, 16, true}, rng);
  CheckDecode<float, 256>(GetParam(), {16, 2, 1, {40, 0}, 0, false}, rng);
  CheckDecode<__nv_bfloat16, 80>(GetParam(), {16, 2, 3, {17, 97, 0}, 0, true}, rng);
  CheckDecode<float, 80>(GetParam(), {1, 1, 8, {97, 5}, 32, true}, rng);
  CheckDecode<__half, 96>(GetParam(), {16, 1, 16, {97, 1}, 17, true}, rng);  // two head chunks
  CheckDecode<__nv_bfloat16, 96>(GetParam(), {1, 2, 1, {15, 16, 17}, 0, false}, rng);
}

TEST_P(PagedDecodeAttentionKernelTest, HeadDims256And80And96InvariantAndInert) {
  std::mt19937 rng(2026);
  CheckBatchInvariance<__nv_bfloat16, 256>(GetParam(), {600, 1, 100, 0}, rng);
  CheckBatchInvariance<float, 96>(GetParam(), {300, 17}, rng);
  CheckPaddingRows<__half, 80>(GetParam(), 45, 16, rng);
  CheckPaddingRows<__nv_bfloat16, 256>(GetParam(), 4096, 0, rng);
}

// Head dim 32 (the tiny hybrid test models, tests/data/hybrid: 8 lanes per key with 4 loading,
// 8 P·V slices of 16 threads): unsplit, forced and heuristic splits, padding rows; batch
// invariance and inert padding.
TEST_P(PagedDecodeAttentionKernelTest, HeadDim32MatchesContiguousReferenceInvariantAndInert) {
  std::mt19937 rng(2032);
  CheckDecode<float, 32>(GetParam(), {16, 2, 2, {97, 0, 15, 1}, 0, true}, rng);
  CheckDecode<__nv_bfloat16, 32>(GetParam(), {1, 1, 3, {17, 16, 33}, 16, true}, rng);
  CheckDecode<__half, 32>(GetParam(), {16, 1, 8, {600, 5}, 0, true}, rng);
  CheckBatchInvariance<float, 32>(GetParam(), {300, 17}, rng);
  CheckPaddingRows<__nv_bfloat16, 32>(GetParam(), 45, 16, rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, PagedDecodeAttentionKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
