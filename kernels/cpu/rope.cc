#include "kernels/cpu/rope.h"

#include <cmath>

#include "common/util/check.h"

namespace tessera::kernels::cpu {

RopeTable::RopeTable(int rope_dim, float theta_base, int64_t max_positions)
    : rope_dim_(rope_dim), max_positions_(max_positions) {
  TESSERA_CHECK(rope_dim > 0 && rope_dim % 2 == 0, "RopeTable: rope_dim must be positive and even");
  TESSERA_CHECK(theta_base > 0.0f, "RopeTable: theta_base must be positive");
  TESSERA_CHECK(max_positions > 0, "RopeTable: max_positions must be positive");
  cos_sin_.resize(static_cast<size_t>(max_positions) * static_cast<size_t>(rope_dim));
  const float theta_scale = std::pow(theta_base, -2.0f / static_cast<float>(rope_dim));
  for (int64_t pos = 0; pos < max_positions; ++pos) {
    float* row = cos_sin_.data() + pos * rope_dim;
    float angle = static_cast<float>(pos);
    for (int i = 0; i < rope_dim / 2; ++i) {
      row[2 * i] = std::cos(angle);
      row[2 * i + 1] = std::sin(angle);
      angle *= theta_scale;
    }
  }
}

const float* RopeTable::CosSin(int64_t pos) const {
  TESSERA_CHECK(pos >= 0 && pos < max_positions_, "RopeTable: position out of range");
  return cos_sin_.data() + pos * rope_dim_;
}

void ApplyRope(const RopeTable& table, std::span<const int32_t> positions, int num_heads,
               int head_dim, std::span<float> x) {
  const int64_t num_tokens = static_cast<int64_t>(positions.size());
  TESSERA_CHECK(num_heads > 0 && head_dim > 0, "ApplyRope: bad head shape");
  TESSERA_CHECK(table.rope_dim() <= head_dim, "ApplyRope: rope_dim exceeds head_dim");
  TESSERA_CHECK(static_cast<int64_t>(x.size()) >= num_tokens * num_heads * head_dim,
                "ApplyRope: x is smaller than [num_tokens, num_heads, head_dim]");
  const int num_pairs = table.rope_dim() / 2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* cos_sin = table.CosSin(positions[t]);
    for (int h = 0; h < num_heads; ++h) {
      float* v = x.data() + (t * num_heads + h) * head_dim;
      for (int i = 0; i < num_pairs; ++i) {
        const float c = cos_sin[2 * i];
        const float s = cos_sin[2 * i + 1];
        const float x0 = v[2 * i];
        const float x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace tessera::kernels::cpu
