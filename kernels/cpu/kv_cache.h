// Paged KV-cache geometry and the write of new tokens' K/V rows into their slots.
//
// One K pool and one V pool per layer, each [num_blocks, block_size, num_kv_heads, head_dim], of
// f32 or (half the memory and bandwidth, values rounded) f16 elements.
// A sequence's logical block b (positions [b * block_size, (b + 1) * block_size)) lives in
// physical block block_table[b]; position p is in slot
//   block_table[p / block_size] * block_size + p % block_size.
// The router owns block ids (DESIGN.md §4); the worker validates plans before calling these, so
// out-of-range ids here are broken invariants and abort.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/float16.h"

namespace tessera::kernels::cpu {

// Element type of the K/V pools.
enum class KvDtype { kF32, kF16 };

inline int64_t KvDtypeBytes(KvDtype dtype) { return dtype == KvDtype::kF16 ? 2 : 4; }

struct PagedKvShape {
  int64_t num_blocks = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  int head_dim = 0;

  int64_t RowElements() const { return static_cast<int64_t>(num_kv_heads) * head_dim; }
  int64_t NumSlots() const { return num_blocks * block_size; }
  int64_t PoolElements() const { return NumSlots() * RowElements(); }
};

// out[t] = slot of position start_pos + t, for t in [0, out.size()).
// Precondition: block_table covers every such position (size >= ceil((start_pos + n) / bs)).
void ComputeSlotMapping(std::span<const int32_t> block_table, int block_size, int64_t start_pos,
                        std::span<int64_t> out);

// k_cache[slot_mapping[t]] <- k[t] and v_cache[...] <- v[t] for every token t with slot >= 0
// (slot -1 marks a padding row and is skipped).
// k, v: [num_tokens, num_kv_heads, head_dim], num_tokens = slot_mapping.size();
// k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim].
// Preconditions: sizes as stated; every slot < shape.NumSlots(); slots of one call are distinct.
void WriteKv(const PagedKvShape& shape, std::span<const int64_t> slot_mapping,
             std::span<const float> k, std::span<const float> v, std::span<float> k_cache,
             std::span<float> v_cache);
// The same into f16 pools: each value rounded to nearest even (ToFloat16).
void WriteKv(const PagedKvShape& shape, std::span<const int64_t> slot_mapping,
             std::span<const float> k, std::span<const float> v, std::span<Float16> k_cache,
             std::span<Float16> v_cache);

}  // namespace tessera::kernels::cpu
