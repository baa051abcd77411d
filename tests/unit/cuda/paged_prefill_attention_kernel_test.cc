// Paged prefill attention CUDA kernel on the emulator vs the contiguous-KV f64 CPU reference
// (reference::Attention per sequence, its chunk at positions [start, start + chunk)), under
// every test schedule. Each launch holds several sequences of different chunk lengths (varlen
// query_start_loc), chunks that start after cached positions, decode rows (chunk 1) and a
// sequence with an empty chunk. Combinations (not the full cross product, to stay well under
// 30 s): each case mixes one dtype (bf16 / f16 / f32), head dim (64 / 128; 256 / 80 / 96 in
// their own test), block size (1 / 16), GQA ratio (1 / 3 / 8, and 40 = a 32-head chunk plus
// an 8-head chunk), batch (1 / 3 / 17) and lengths from 1, 15, 16, 17, 97; a padding sequence
// with no tokens and no context. Block tables are shuffled. Tolerance: the decode test's
// (paged_attention_test_util.h): f32 online softmax, one rounding to T.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/cuda/paged_prefill_attention.cuh"
#include "tests/unit/cuda/kernel_test_env.h"
#include "tests/unit/cuda/paged_attention_test_util.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

struct Chunk {
  int start;  // cached positions before the chunk
  int length;
};

struct PrefillCase {
  int block_size;
  int num_kv_heads;
  int group;
  std::vector<Chunk> chunks;
};

// Runs the kernel on `kv` (contexts = kv.lengths) and returns the output.
template <typename T, int kHeadDim>
std::vector<T> RunPrefill(const simt::Schedule& schedule, const PagedPrefillParams& params,
                          const std::vector<T>& q, const simt::PagedKv<T>& kv,
                          const std::vector<int32_t>& query_start_loc) {
  const std::vector<int32_t> contexts(kv.lengths.begin(), kv.lengths.end());
  DeviceBuffer<T> d_q{std::span<const T>(q)}, d_k{std::span<const T>(kv.k_pool)},
      d_v{std::span<const T>(kv.v_pool)}, d_out(q.size());
  DeviceBuffer<int32_t> d_tables{std::span<const int32_t>(kv.block_tables)},
      d_query_start{std::span<const int32_t>(query_start_loc)},
      d_contexts{std::span<const int32_t>(contexts)};
  for (size_t i = 0; i < q.size(); ++i) d_out[i] = simt::FloatTo<T>(7.0f);  // must be overwritten
  simt::TestLauncher launcher(schedule);
  const auto status = LaunchPagedPrefillAttention<simt::TestLauncher, T, kHeadDim>(
      launcher, params, d_q.get(), d_k.get(), d_v.get(), d_tables.get(), d_query_start.get(),
      d_contexts.get(), d_out.get());
  EXPECT_TRUE(status.ok()) << status;
  return d_out.ToHost();
}

template <typename T, int kHeadDim>
void CheckPrefill(const simt::Schedule& schedule, const PrefillCase& c, std::mt19937& rng) {
  const int num_seqs = int(c.chunks.size());
  const int num_heads = c.num_kv_heads * c.group;
  std::vector<int> contexts;
  std::vector<int32_t> query_start_loc = {0};
  int max_query_len = 0;
  for (const Chunk& chunk : c.chunks) {
    contexts.push_back(chunk.start + chunk.length);
    query_start_loc.push_back(query_start_loc.back() + chunk.length);
    max_query_len = std::max(max_query_len, chunk.length);
  }
  const int num_tokens = query_start_loc.back();
  const simt::PagedKv<T> kv(contexts, c.block_size, c.num_kv_heads, kHeadDim, rng);
  const size_t row = size_t(num_heads) * kHeadDim;
  const std::vector<T> q = simt::Convert<T>(simt::RandomFloats(num_tokens * row, rng, -2, 2));
  PagedPrefillParams params;
  params.num_seqs = num_seqs;
  params.num_heads = num_heads;
  params.num_kv_heads = c.num_kv_heads;
  params.block_size = c.block_size;
  params.max_blocks_per_seq = kv.max_blocks_per_seq;
  params.max_query_len = max_query_len;
  params.scale = 1.0f / std::sqrt(float(kHeadDim));

  const std::vector<T> got = RunPrefill<T, kHeadDim>(schedule, params, q, kv, query_start_loc);
  // Paged = contiguous: the same K/V in consecutive blocks give the same bits.
  const std::vector<T> repacked =
      RunPrefill<T, kHeadDim>(schedule, params, q, kv.Repacked(), query_start_loc);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(simt::Bits(got[i]), simt::Bits(repacked[i])) << "element " << i;
  }

  const std::vector<float> q_floats = simt::ToFloats<T>(q);
  for (int s = 0; s < num_seqs; ++s) {
    const Chunk chunk = c.chunks[s];
    if (chunk.length == 0) continue;
    const size_t first = query_start_loc[s] * row, count = chunk.length * row;
    std::vector<float> expected(count), magnitude(count);
    const std::vector<float> keys = kv.Contiguous(kv.k_pool, s, contexts[s]);
    std::vector<float> values = kv.Contiguous(kv.v_pool, s, contexts[s]);
    const auto queries = std::span<const float>(q_floats).subspan(first, count);
    kernels::cpu::reference::Attention(queries, keys, values, chunk.length, chunk.start,
                                       num_heads, c.num_kv_heads, kHeadDim, params.scale,
                                       expected);
    // The tensor-core kernel rounds the probabilities to T before P·V: each output element may
    // move by up to T's unit roundoff times Σ_j p_j |v_j| (attention over |V|).
    float roundoff = 0.0f;
    if constexpr (PrefillUsesTensorCores<T, kHeadDim>) {
      roundoff = std::is_same_v<T, __half> ? 1.0f / 2048 : 1.0f / 256;
      for (float& v : values) v = std::fabs(v);
      kernels::cpu::reference::Attention(queries, keys, values, chunk.length, chunk.start,
                                         num_heads, c.num_kv_heads, kHeadDim, params.scale,
                                         magnitude);
    }
    for (size_t i = 0; i < count; ++i) {
      ASSERT_NEAR(simt::AsFloat(got[first + i]), expected[i],
                  simt::AttentionTolerance<T>(expected[i]) + roundoff * magnitude[i])
          << "seq " << s << " start " << chunk.start << " chunk " << chunk.length << " token "
          << i / row << " head " << i % row / kHeadDim << " dim " << i % kHeadDim
          << " block_size " << c.block_size << " group " << c.group;
    }
  }
}

class PagedPrefillAttentionKernelTest : public simt::KernelTest {};

TEST_P(PagedPrefillAttentionKernelTest, FullPromptMatchesContiguousReference) {
  std::mt19937 rng(31);
  CheckPrefill<__nv_bfloat16, 128>(GetParam(), {16, 1, 8, {{0, 97}}}, rng);
  CheckPrefill<__half, 64>(GetParam(), {1, 2, 1, {{0, 17}}}, rng);
}

TEST_P(PagedPrefillAttentionKernelTest, ChunkedWithDecodeRowsMatchesContiguousReference) {
  std::mt19937 rng(32);
  CheckPrefill<__half, 64>(GetParam(), {1, 2, 3, {{0, 15}, {16, 17}, {96, 1}}}, rng);
  CheckPrefill<__half, 128>(GetParam(), {1, 1, 3, {{33, 97}}}, rng);
  CheckPrefill<__nv_bfloat16, 64>(GetParam(), {16, 1, 40, {{3, 5}, {0, 1}, {16, 0}}}, rng);
}

TEST_P(PagedPrefillAttentionKernelTest, RaggedBatchOf17MatchesContiguousReference) {
  std::mt19937 rng(33);
  const PrefillCase ragged{16, 3, 1, {{0, 1},  {5, 15},  {16, 16}, {40, 1},  {0, 17}, {17, 1},
                                      {15, 0}, {1, 1},   {31, 16}, {2, 15},  {96, 1}, {0, 16},
                                      {64, 1}, {16, 17}, {3, 1},   {47, 15}, {0, 2}}};
  CheckPrefill<__nv_bfloat16, 64>(GetParam(), ragged, rng);
}

// f32 (the runner's --dtype f32; head_dim 128 runs 16 rows per block, kPrefillRowsFor), with a
// padding sequence of the captured batch: no cached positions and no query tokens ({0, 0}).
TEST_P(PagedPrefillAttentionKernelTest, F32MatchesContiguousReference) {
  std::mt19937 rng(34);
  CheckPrefill<float, 64>(GetParam(), {16, 2, 3, {{0, 15}, {0, 0}, {16, 17}, {96, 1}}}, rng);
  CheckPrefill<float, 128>(GetParam(), {1, 1, 40, {{3, 5}, {0, 0}, {0, 1}}}, rng);
  CheckPrefill<float, 128>(GetParam(), {16, 2, 1, {{0, 33}, {5, 2}}}, rng);
}

// Head dims 256 (Qwen3-Next / Qwen3.5 full attention: 8 rows per block, and 16-key K/V tiles in
// f32), 80 and 96 (3 dims per lane, the last partial at 80; 16 rows per block), with several
// head chunks (group 16 at 256, 40 at 80), chunks after cached positions, decode rows and a
// padding sequence.
TEST_P(PagedPrefillAttentionKernelTest, HeadDims256And80And96MatchContiguousReference) {
  std::mt19937 rng(35);
  CheckPrefill<__nv_bfloat16, 256>(GetParam(), {16, 2, 8, {{0, 40}, {33, 17}, {96, 1}}}, rng);
  CheckPrefill<float, 256>(GetParam(), {1, 1, 3, {{0, 17}, {15, 0}, {16, 16}}}, rng);
  CheckPrefill<__half, 256>(GetParam(), {16, 1, 16, {{3, 5}, {0, 1}}}, rng);
  CheckPrefill<__nv_bfloat16, 80>(GetParam(), {16, 2, 3, {{0, 33}, {16, 17}, {96, 1}}}, rng);
  CheckPrefill<float, 80>(GetParam(), {1, 1, 40, {{3, 5}, {0, 0}, {0, 1}}}, rng);
  CheckPrefill<__half, 96>(GetParam(), {16, 1, 8, {{0, 97}}}, rng);
  CheckPrefill<__nv_bfloat16, 96>(GetParam(), {1, 2, 1, {{15, 16}, {0, 0}}}, rng);
}

// Head dim 32 (the tiny hybrid test models, tests/data/hybrid: one dim per lane, 64 rows per
// block): GQA 2, chunks after cached positions, decode rows and a padding sequence.
TEST_P(PagedPrefillAttentionKernelTest, HeadDim32MatchesContiguousReference) {
  std::mt19937 rng(32);
  CheckPrefill<float, 32>(GetParam(), {16, 2, 2, {{0, 70}, {33, 5}, {7, 1}, {0, 0}}}, rng);
  CheckPrefill<__nv_bfloat16, 32>(GetParam(), {1, 1, 3, {{0, 17}, {15, 1}}}, rng);
  CheckPrefill<__half, 32>(GetParam(), {16, 2, 1, {{3, 16}}}, rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, PagedPrefillAttentionKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
