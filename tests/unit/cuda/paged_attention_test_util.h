// Shared setup of the paged attention kernel tests: a shuffled paged pool holding the K/V of
// several sequences, and the contiguous copy of one sequence's K/V the CPU reference reads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "tests/unit/cuda/device_buffer.h"

namespace tessera::simt {

// Pools [num_blocks, block_size, num_kv_heads, head_dim] with random values everywhere (unused
// blocks included), and block tables [num_seqs, max_blocks_per_seq] that give each sequence
// physical blocks in shuffled (non-contiguous, non-monotonic) order; table entries past a
// sequence's length are -1.
template <typename T>
struct PagedKv {
  int block_size = 0, num_kv_heads = 0, head_dim = 0, num_blocks = 0, max_blocks_per_seq = 0;
  std::vector<T> k_pool, v_pool;
  std::vector<int32_t> block_tables;

  std::vector<int> lengths;

  PagedKv(std::span<const int> lengths_in, int block_size_in, int num_kv_heads_in,
          int head_dim_in, std::mt19937& rng)
      : block_size(block_size_in),
        num_kv_heads(num_kv_heads_in),
        head_dim(head_dim_in),
        lengths(lengths_in.begin(), lengths_in.end()) {
    int total = 0;
    for (int length : lengths) {
      const int blocks = (length + block_size - 1) / block_size;
      max_blocks_per_seq = std::max(max_blocks_per_seq, blocks);
      total += blocks;
    }
    max_blocks_per_seq = std::max(max_blocks_per_seq, 1);
    num_blocks = total + 3;  // spare blocks nobody owns
    std::vector<int32_t> ids(num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    block_tables.assign(lengths.size() * max_blocks_per_seq, -1);
    size_t next = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const int blocks = (lengths[s] + block_size - 1) / block_size;
      for (int b = 0; b < blocks; ++b) block_tables[s * max_blocks_per_seq + b] = ids[next++];
    }
    const size_t pool_size = size_t(num_blocks) * block_size * num_kv_heads * head_dim;
    k_pool = Convert<T>(RandomFloats(pool_size, rng));
    v_pool = Convert<T>(RandomFloats(pool_size, rng));
  }

  // The same K/V with each sequence's blocks moved to consecutive physical ids in sequence
  // order (identity-like tables): a kernel must give bit-identical results on both layouts.
  PagedKv Repacked() const {
    PagedKv other = *this;
    const size_t block_elements = size_t(block_size) * num_kv_heads * head_dim;
    int32_t next = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const int blocks = (lengths[s] + block_size - 1) / block_size;
      for (int b = 0; b < blocks; ++b) {
        const int32_t from = block_tables[s * max_blocks_per_seq + b], to = next++;
        other.block_tables[s * max_blocks_per_seq + b] = to;
        std::copy_n(k_pool.begin() + from * block_elements, block_elements,
                    other.k_pool.begin() + to * block_elements);
        std::copy_n(v_pool.begin() + from * block_elements, block_elements,
                    other.v_pool.begin() + to * block_elements);
      }
    }
    return other;
  }

  // The first `length` positions of sequence `seq` as contiguous f32 [length, num_kv_heads,
  // head_dim], read from `pool` (k_pool or v_pool) through the block table.
  std::vector<float> Contiguous(const std::vector<T>& pool, int seq, int length) const {
    const size_t row = size_t(num_kv_heads) * head_dim;
    std::vector<float> out(length * row);
    for (int j = 0; j < length; ++j) {
      const int32_t physical = block_tables[seq * max_blocks_per_seq + j / block_size];
      const size_t slot = size_t(physical) * block_size + j % block_size;
      for (size_t i = 0; i < row; ++i) out[j * row + i] = AsFloat(pool[slot * row + i]);
    }
    return out;
  }
};

// The bits of a bf16, f16 or f32 value (bit-identity checks).
template <typename T>
uint32_t Bits(T value) {
  static_assert(sizeof(T) <= sizeof(uint32_t));
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

// Tolerance of one output element against the f64 reference. The output is a convex
// combination of V values in [-1, 1]; the kernel accumulates in f32 (relative error ~1e-6 over
// <= 600 terms, plus exp/max reordering across partitions) and rounds once to T (half an ulp:
// 2^-9 relative for bf16, 2^-12 for f16, 2^-24 for f32). Allowed: one ulp of T relative (1e-5
// for f32, where __expf and the accumulation dominate) plus 2e-5 absolute.
template <typename T>
float AttentionTolerance(float expected) {
  float relative = 1.0f / 128;
  if constexpr (std::is_same_v<T, __half>) relative = 1.0f / 1024;
  if constexpr (std::is_same_v<T, float>) relative = 1e-5f;
  return relative * std::fabs(expected) + 2e-5f;
}

}  // namespace tessera::simt
