// Rotary position embedding, llama / GGUF convention ("normal" mode, not NeoX).
//
// llama.cpp's converter permutes the Q/K weights so the rotation applies to ADJACENT pairs:
// for pair i < rope_dim / 2, (x[2i], x[2i+1]) is rotated by angle pos * theta_base^(-2i/rope_dim):
//   x'[2i]   = x[2i] * cos - x[2i+1] * sin
//   x'[2i+1] = x[2i] * sin + x[2i+1] * cos
// Dimensions >= rope_dim are left unchanged.
//
// The angles replicate ggml's float arithmetic (ggml_rope_cache_init with freq_scale 1,
// ext_factor 0, attn_factor 1, no freq factors — llama's settings without YaRN):
//   theta_scale = powf(theta_base, -2.0f / rope_dim);  angle_0 = (float)pos;
//   angle_{i+1} = angle_i * theta_scale (f32);  cos = cosf(angle_i), sin = sinf(angle_i).
// We chose to match ggml bit for bit (rather than compute angles in f64) because the llama.cpp
// logits are our oracle; the per-pair error of the incremental product is ~i ulp of the angle,
// the same error llama.cpp has. Angles depend only on (pos, i): batch invariant.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera::kernels::cpu {

// Precomputed cos/sin for positions [0, max_positions). Immutable after construction; safe to
// share between threads. Memory: max_positions * rope_dim floats.
class RopeTable {
 public:
  // Preconditions: rope_dim > 0 and even; theta_base > 0; max_positions > 0.
  RopeTable(int rope_dim, float theta_base, int64_t max_positions);

  int rope_dim() const { return rope_dim_; }
  int64_t max_positions() const { return max_positions_; }

  // [rope_dim / 2][2]: cos, sin of each pair's angle at `pos`. Precondition: 0 <= pos < max.
  const float* CosSin(int64_t pos) const;

 private:
  int rope_dim_;
  int64_t max_positions_;
  std::vector<float> cos_sin_;  // [max_positions, rope_dim / 2, 2]
};

// Rotates x [num_tokens, num_heads, head_dim] in place; token t is at positions[t].
// Preconditions: num_tokens = positions.size(); x.size() >= num_tokens * num_heads * head_dim;
// table.rope_dim() <= head_dim; every position in [0, table.max_positions()).
void ApplyRope(const RopeTable& table, std::span<const int32_t> positions, int num_heads,
               int head_dim, std::span<float> x);

}  // namespace tessera::kernels::cpu
