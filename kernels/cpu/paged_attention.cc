#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/util/check.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_scalar.h"

namespace tessera::kernels::cpu {
namespace {

// KvT: float or Float16, the pools' element type.
template <typename KvT>
struct AttnArgsT {
  const float* q;      // [rows, num_heads, head_dim]
  const KvT* k_cache;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const KvT* v_cache;
  float* out;            // [rows, num_heads, head_dim]
  int num_heads;
  int group;  // query heads per KV head
  int head_dim;
  int64_t block_size;
  int64_t kv_row;  // num_kv_heads * head_dim
  float scale;
};

// Per-thread score buffer, grown on demand and reused.
float* ScoreScratch(size_t num_floats) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < num_floats) scratch.resize(num_floats);
  return scratch.data();
}

}  // namespace

namespace scalar {
#include "kernels/cpu/softmax_impl.inc"
#include "kernels/cpu/paged_attention_impl.inc"
}  // namespace scalar

#if TESSERA_X86_SIMD
TESSERA_BEGIN_TARGET_AVX2
namespace avx2 {
#include "kernels/cpu/softmax_impl.inc"
#include "kernels/cpu/paged_attention_impl.inc"
}  // namespace avx2
TESSERA_END_TARGET

TESSERA_BEGIN_TARGET_AVX512
namespace avx512 {
#include "kernels/cpu/softmax_impl.inc"
#include "kernels/cpu/paged_attention_impl.inc"
}  // namespace avx512
TESSERA_END_TARGET
#endif

namespace {

// Checks shapes and block tables; returns the total number of query rows.
template <typename KvT>
int64_t ValidateAttention(const PagedAttentionParams& p, std::span<const float> q,
                          std::span<const KvT> k_cache, std::span<const KvT> v_cache,
                          std::span<const AttentionSequence> sequences, std::span<float> out,
                          int64_t* max_context) {
  const PagedKvShape& kv = p.kv;
  TESSERA_CHECK(kv.num_kv_heads > 0 && p.num_heads % kv.num_kv_heads == 0,
                "PagedAttention: num_heads must be a positive multiple of num_kv_heads");
  TESSERA_CHECK(kv.head_dim > 0 && kv.head_dim <= kMaxAttentionHeadDim,
                "PagedAttention: head_dim out of range");
  TESSERA_CHECK(kv.block_size > 0, "PagedAttention: block_size must be positive");
  TESSERA_CHECK(static_cast<int64_t>(k_cache.size()) >= kv.PoolElements() &&
                    static_cast<int64_t>(v_cache.size()) >= kv.PoolElements(),
                "PagedAttention: cache smaller than its shape");
  int64_t rows = 0;
  *max_context = 0;
  for (const AttentionSequence& s : sequences) {
    TESSERA_CHECK(s.query_begin == rows, "PagedAttention: sequences must be back to back");
    TESSERA_CHECK(s.num_query_tokens >= 0 && s.start_pos >= 0, "PagedAttention: bad sequence");
    const int64_t context = static_cast<int64_t>(s.start_pos) + s.num_query_tokens;
    const int64_t blocks_needed = (context + kv.block_size - 1) / kv.block_size;
    TESSERA_CHECK(static_cast<int64_t>(s.block_table.size()) >= blocks_needed,
                  "PagedAttention: block table does not cover the context");
    for (int64_t b = 0; b < blocks_needed; ++b) {
      TESSERA_CHECK(s.block_table[b] >= 0 && s.block_table[b] < kv.num_blocks,
                    "PagedAttention: block id out of range");
    }
    rows += s.num_query_tokens;
    if (context > *max_context) *max_context = context;
  }
  const int64_t elements = rows * p.num_heads * kv.head_dim;
  TESSERA_CHECK(static_cast<int64_t>(q.size()) >= elements, "PagedAttention: q too small");
  TESSERA_CHECK(static_cast<int64_t>(out.size()) >= elements, "PagedAttention: out too small");
  return rows;
}

// Index of the sequence that owns query row `row` (sequences are back to back).
size_t SequenceOfRow(std::span<const AttentionSequence> sequences, int64_t row) {
  size_t lo = 0;
  size_t hi = sequences.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    if (sequences[mid].query_begin <= row) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Query heads processed together (see AttendHeads): limited by registers for the accumulators.
int HeadGroupSize(int head_dim, int group) {
  const int limit = head_dim == 64 ? 4 : head_dim == 128 ? 2 : 1;
  // Split a group evenly: 3 -> 3, 6 -> 3 + 3, 8 -> 4 + 4, 7 -> 4 + 3.
  const int parts = (group + limit - 1) / limit;
  return (group + parts - 1) / parts;
}

template <typename KvT>
void RunPagedAttention(ThreadPool& pool, const PagedAttentionParams& params,
                       std::span<const float> q, std::span<const KvT> k_cache,
                       std::span<const KvT> v_cache, std::span<const AttentionSequence> sequences,
                       std::span<float> out, Isa isa) {
  TESSERA_CHECK(IsaSupported(isa), "PagedAttention: ISA not supported by this CPU");
  int64_t max_context = 0;
  const int64_t rows =
      ValidateAttention(params, q, k_cache, v_cache, sequences, out, &max_context);
  if (rows == 0) return;
  const AttnArgsT<KvT> args{q.data(),
                      k_cache.data(),
                      v_cache.data(),
                      out.data(),
                      params.num_heads,
                      params.num_heads / params.kv.num_kv_heads,
                      params.kv.head_dim,
                      params.kv.block_size,
                      params.kv.RowElements(),
                      params.scale};
  // Work items: (head group, row), head-group-major. A head group is a run of query heads that
  // share a KV head and are processed together (K/V rows loaded once for the group).
  const int group_size = HeadGroupSize(params.kv.head_dim, args.group);
  const int groups_per_kv = (args.group + group_size - 1) / group_size;
  const int64_t num_groups = static_cast<int64_t>(params.kv.num_kv_heads) * groups_per_kv;
  pool.ParallelFor(rows * num_groups, [&](int64_t begin, int64_t end) {
    float* scores = ScoreScratch(static_cast<size_t>(max_context * group_size));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t head_group = item / rows;
      const int64_t row = item % rows;
      const int kv_head = static_cast<int>(head_group / groups_per_kv);
      const int sub = static_cast<int>(head_group % groups_per_kv);
      const int first_head = kv_head * args.group + sub * group_size;
      const int count = std::min(group_size, args.group - sub * group_size);
      const AttentionSequence& s = sequences[SequenceOfRow(sequences, row)];
      const int64_t pos = s.start_pos + (row - s.query_begin);
      const int32_t* table = s.block_table.data();
      switch (isa) {
#if TESSERA_X86_SIMD
        case Isa::kAvx512:
          avx512::AttendHeads(args, table, pos, row, first_head, count, scores);
          break;
        case Isa::kAvx2:
          avx2::AttendHeads(args, table, pos, row, first_head, count, scores);
          break;
#endif
        default:
          scalar::AttendHeads(args, table, pos, row, first_head, count, scores);
      }
    }
  });
}

}  // namespace

void PagedAttention(ThreadPool& pool, const PagedAttentionParams& params, std::span<const float> q,
                    std::span<const float> k_cache, std::span<const float> v_cache,
                    std::span<const AttentionSequence> sequences, std::span<float> out, Isa isa) {
  RunPagedAttention<float>(pool, params, q, k_cache, v_cache, sequences, out, isa);
}

void PagedAttention(ThreadPool& pool, const PagedAttentionParams& params, std::span<const float> q,
                    std::span<const Float16> k_cache, std::span<const Float16> v_cache,
                    std::span<const AttentionSequence> sequences, std::span<float> out, Isa isa) {
  RunPagedAttention<Float16>(pool, params, q, k_cache, v_cache, sequences, out, isa);
}

}  // namespace tessera::kernels::cpu
