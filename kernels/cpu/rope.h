// Rotary position embedding as ggml computes it (ggml_rope_ext), in its two pairings:
//
// Normal mode (GGML_ROPE_TYPE_NORMAL; the `llama` architecture): llama.cpp's converter permutes
// llama's Q/K weights so the rotation applies to ADJACENT pairs: for pair i < rope_dim / 2,
//   x'[2i]   = x[2i] * cos - x[2i+1] * sin
//   x'[2i+1] = x[2i] * sin + x[2i+1] * cos
// NeoX mode (GGML_ROPE_TYPE_NEOX; qwen2, qwen3, ...: HF's rotate_half, weights stored as trained):
// pair i is (x[i], x[i + rope_dim/2]), rotated by the same formula with the same cos/sin.
// In both modes pair i is rotated by angle pos * theta_base^(-2i/rope_dim), and dimensions
// >= rope_dim are left unchanged (ggml copies the tail in both modes; a NeoX pair never reaches
// past rope_dim). So NeoX RoPE on x equals normal RoPE on x with its first rope_dim values
// de-interleaved (x[i], x[i + rope_dim/2] -> x[2i], x[2i+1]), interleaved back — bit for bit.
//
// The angles replicate ggml's float arithmetic (ggml_rope_cache_init + rope_yarn in ggml-cpu):
//   theta_scale = powf(theta_base, -2.0f / rope_dim);  theta_0 = (float)pos;
//   theta_{i+1} = theta_i * theta_scale (f32);
//   extrap_i = theta_i / freq_factors[i]            (Llama 3 rope_freqs; 1 when absent)
//   interp_i = freq_scale * extrap_i                (freq_scale = 1 / scaling factor)
//   angle_i  = interp_i                                           without YaRN (ext_factor 0)
//            = interp_i * (1 - mix_i) + extrap_i * mix_i           with YaRN, where
//     mix_i  = ext_factor * (1 - clamp((i - low) / max(0.001, high - low), 0, 1))
//     [low, high] = YarnCorrectionDims(...): pairs below `low` rotate more than beta_fast times
//     over the original context and keep their angle; pairs above `high` are interpolated.
//   mscale   = attn_factor * (YaRN ? 1 + 0.1 * logf(1 / freq_scale) : 1)
//   cos = cosf(angle_i) * mscale, sin = sinf(angle_i) * mscale.
// With the default RopeParams (freq_scale 1, no factors, ext_factor 0, attn_factor 1) every extra
// step is an exact identity (x / 1, 1 * x, x * 1), so unscaled tables are bit-identical to plain
// RoPE. We chose to match ggml bit for bit (rather than compute angles in f64) because the
// llama.cpp logits are our oracle; the per-pair error of the incremental product is ~i ulp of the
// angle, the same error llama.cpp has. Angles depend only on (pos, i): batch invariant.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tessera::kernels::cpu {

// Which elements form a rotated pair (ggml's rope `mode`); see the top of this file.
enum class RopeMode {
  kNormal,  // (2i, 2i + 1)
  kNeox,    // (i, i + rope_dim / 2)
};

std::string_view RopeModeName(RopeMode mode);  // "normal", "neox"

// ggml_rope_ext's parameters. The defaults mean "no scaling", normal mode.
struct RopeParams {
  int rope_dim = 0;                 // rotated dimensions, even
  RopeMode mode = RopeMode::kNormal;
  float theta_base = 10000.0f;      // freq_base
  float freq_scale = 1.0f;          // 1 / scaling factor (linear and YaRN)
  float ext_factor = 0.0f;          // YaRN mix weight: 1 for YaRN, 0 for plain interpolation
  float attn_factor = 1.0f;         // multiplies cos and sin (before YaRN's own magnitude scale)
  int original_context_length = 0;  // YaRN's n_ctx_orig; must be > 0 when ext_factor != 0
  float beta_fast = 32.0f;          // YaRN correction range, in rotations over n_ctx_orig
  float beta_slow = 1.0f;
  std::vector<float> freq_factors;  // [rope_dim / 2] divisors of each pair's angle; empty = none
};

// ggml_rope_yarn_corr_dims: the pair range [low, high] (as floats, clamped to [0, rope_dim - 1])
// over which YaRN ramps from extrapolation to interpolation. A pair index i is compared with
// these directly; the dimension d of the formula is
//   d(n_rot) = rope_dim * logf(n_ctx_orig / (n_rot * 2 * pi)) / (2 * logf(theta_base)),
//   low = floorf(d(beta_fast)), high = ceilf(d(beta_slow)).
// Preconditions: rope_dim > 0, original_context_length > 0, theta_base > 0 and != 1, betas > 0.
std::array<float, 2> YarnCorrectionDims(int rope_dim, int original_context_length,
                                        float theta_base, float beta_fast, float beta_slow);

// Precomputed cos/sin for positions [0, max_positions). Immutable after construction; safe to
// share between threads. Memory: max_positions * rope_dim floats.
class RopeTable {
 public:
  // Preconditions: rope_dim > 0 and even; theta_base, freq_scale, attn_factor finite and > 0;
  // freq_factors empty or rope_dim / 2 finite positive values; with ext_factor != 0,
  // original_context_length > 0 and betas > 0; max_positions > 0.
  RopeTable(const RopeParams& params, int64_t max_positions);
  // Plain normal-mode RoPE (no scaling, no frequency factors).
  RopeTable(int rope_dim, float theta_base, int64_t max_positions);

  int rope_dim() const { return rope_dim_; }
  RopeMode mode() const { return mode_; }
  int64_t max_positions() const { return max_positions_; }

  // [rope_dim / 2][2]: cos, sin of each pair's angle at `pos`. Precondition: 0 <= pos < max.
  const float* CosSin(int64_t pos) const;

 private:
  int rope_dim_;
  RopeMode mode_;
  int64_t max_positions_;
  std::vector<float> cos_sin_;  // [max_positions, rope_dim / 2, 2]
};

// Rotates x [num_tokens, num_heads, head_dim] in place, pairing elements by table.mode(); token t
// is at positions[t].
// Preconditions: num_tokens = positions.size(); x.size() >= num_tokens * num_heads * head_dim;
// table.rope_dim() <= head_dim; every position in [0, table.max_positions()).
void ApplyRope(const RopeTable& table, std::span<const int32_t> positions, int num_heads,
               int head_dim, std::span<float> x);

}  // namespace tessera::kernels::cpu
