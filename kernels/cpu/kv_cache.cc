#include "kernels/cpu/kv_cache.h"

#include <cstring>
#include <type_traits>

#include "common/util/check.h"

namespace tessera::kernels::cpu {

void ComputeSlotMapping(std::span<const int32_t> block_table, int block_size, int64_t start_pos,
                        std::span<int64_t> out) {
  TESSERA_CHECK(block_size > 0 && start_pos >= 0, "ComputeSlotMapping: bad block size or start");
  for (size_t t = 0; t < out.size(); ++t) {
    const int64_t pos = start_pos + static_cast<int64_t>(t);
    const int64_t logical = pos / block_size;
    TESSERA_CHECK(logical < static_cast<int64_t>(block_table.size()),
                  "ComputeSlotMapping: block table does not cover the position");
    out[t] = static_cast<int64_t>(block_table[logical]) * block_size + pos % block_size;
  }
}

namespace {

template <typename KvT>
void WriteKvRows(const PagedKvShape& shape, std::span<const int64_t> slot_mapping,
                 std::span<const float> k, std::span<const float> v, std::span<KvT> k_cache,
                 std::span<KvT> v_cache) {
  const int64_t row = shape.RowElements();
  const int64_t num_tokens = static_cast<int64_t>(slot_mapping.size());
  TESSERA_CHECK(static_cast<int64_t>(k.size()) >= num_tokens * row &&
                    static_cast<int64_t>(v.size()) >= num_tokens * row,
                "WriteKv: k/v smaller than [num_tokens, num_kv_heads, head_dim]");
  TESSERA_CHECK(static_cast<int64_t>(k_cache.size()) >= shape.PoolElements() &&
                    static_cast<int64_t>(v_cache.size()) >= shape.PoolElements(),
                "WriteKv: cache smaller than its shape");
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    TESSERA_CHECK(slot < shape.NumSlots(), "WriteKv: slot out of range");
    if constexpr (std::is_same_v<KvT, float>) {
      std::memcpy(k_cache.data() + slot * row, k.data() + t * row, row * sizeof(float));
      std::memcpy(v_cache.data() + slot * row, v.data() + t * row, row * sizeof(float));
    } else {
      for (int64_t i = 0; i < row; ++i) {
        k_cache[slot * row + i] = ToFloat16(k[t * row + i]);
        v_cache[slot * row + i] = ToFloat16(v[t * row + i]);
      }
    }
  }
}

}  // namespace

void WriteKv(const PagedKvShape& shape, std::span<const int64_t> slot_mapping,
             std::span<const float> k, std::span<const float> v, std::span<float> k_cache,
             std::span<float> v_cache) {
  WriteKvRows<float>(shape, slot_mapping, k, v, k_cache, v_cache);
}

void WriteKv(const PagedKvShape& shape, std::span<const int64_t> slot_mapping,
             std::span<const float> k, std::span<const float> v, std::span<Float16> k_cache,
             std::span<Float16> v_cache) {
  WriteKvRows<Float16>(shape, slot_mapping, k, v, k_cache, v_cache);
}

}  // namespace tessera::kernels::cpu
