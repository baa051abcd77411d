#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/util/check.h"

namespace tessera::kernels::cpu {
namespace {

bool FinitePositive(float x) { return std::isfinite(x) && x > 0.0f; }

void CheckParams(const RopeParams& p, int64_t max_positions) {
  TESSERA_CHECK(p.rope_dim > 0 && p.rope_dim % 2 == 0,
                "RopeTable: rope_dim must be positive and even");
  TESSERA_CHECK(p.theta_base > 0.0f, "RopeTable: theta_base must be positive");
  TESSERA_CHECK(FinitePositive(p.freq_scale), "RopeTable: freq_scale must be finite and positive");
  TESSERA_CHECK(FinitePositive(p.attn_factor),
                "RopeTable: attn_factor must be finite and positive");
  TESSERA_CHECK(std::isfinite(p.ext_factor), "RopeTable: ext_factor must be finite");
  TESSERA_CHECK(p.freq_factors.empty() ||
                    static_cast<int>(p.freq_factors.size()) == p.rope_dim / 2,
                "RopeTable: freq_factors must hold rope_dim / 2 values");
  for (float f : p.freq_factors) {
    TESSERA_CHECK(FinitePositive(f), "RopeTable: freq_factors must be finite and positive");
  }
  TESSERA_CHECK(max_positions > 0, "RopeTable: max_positions must be positive");
}

// YaRN's per-pair mix weight (ggml's rope_yarn_ramp times ext_factor), [rope_dim / 2]; all zero
// without YaRN. Depends only on the pair, so computed once rather than per position as ggml
// does — the same float operations, hence the same values.
std::vector<float> YarnMix(const RopeParams& p) {
  std::vector<float> mix(p.rope_dim / 2, 0.0f);
  if (p.ext_factor == 0.0f) return mix;
  const auto [low, high] = YarnCorrectionDims(p.rope_dim, p.original_context_length,
                                              p.theta_base, p.beta_fast, p.beta_slow);
  for (int i = 0; i < p.rope_dim / 2; ++i) {
    const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
    const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, y));
    mix[i] = ramp * p.ext_factor;
  }
  return mix;
}

// cos/sin magnitude: attn_factor, times YaRN's 1 + 0.1 ln(1 / freq_scale) ("mscale", the
// attention-entropy correction of the YaRN paper) when YaRN is on.
float Magnitude(const RopeParams& p) {
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  return mscale;
}

// Pair i of a head is (v[i * stride], v[i * stride + offset]): stride 2 / offset 1 in normal
// mode, stride 1 / offset num_pairs in NeoX mode (ggml's rotate_pairs with n_offset = n_dims / 2).
// The rotation arithmetic is the same in both, so both modes round identically per pair.
template <int kStride>
void RotatePairs(const float* cos_sin, int num_pairs, int offset, float* v) {
  for (int i = 0; i < num_pairs; ++i) {
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    float* first = v + kStride * i;
    const float x0 = first[0];
    const float x1 = first[offset];
    first[0] = x0 * c - x1 * s;
    first[offset] = x0 * s + x1 * c;
  }
}

RopeParams PlainParams(int rope_dim, float theta_base) {
  RopeParams params;
  params.rope_dim = rope_dim;
  params.theta_base = theta_base;
  return params;
}

}  // namespace

std::string_view RopeModeName(RopeMode mode) {
  switch (mode) {
    case RopeMode::kNormal:
      return "normal";
    case RopeMode::kNeox:
      return "neox";
  }
  return "unknown";
}

std::array<float, 2> YarnCorrectionDims(int rope_dim, int original_context_length,
                                        float theta_base, float beta_fast, float beta_slow) {
  TESSERA_CHECK(rope_dim > 0 && original_context_length > 0,
                "YarnCorrectionDims: rope_dim and original_context_length must be positive");
  TESSERA_CHECK(theta_base > 0.0f && theta_base != 1.0f && beta_fast > 0.0f && beta_slow > 0.0f,
                "YarnCorrectionDims: theta_base must be positive and != 1, betas positive");
  // All in f32, as ggml_rope_yarn_corr_dim does.
  const auto dim_for = [&](float num_rotations) {
    const float two_pi_rotations = num_rotations * 2.0f * std::numbers::pi_v<float>;
    return static_cast<float>(rope_dim) *
           std::log(static_cast<float>(original_context_length) / two_pi_rotations) /
           (2.0f * std::log(theta_base));
  };
  const float low = std::floor(dim_for(beta_fast));
  const float high = std::ceil(dim_for(beta_slow));
  return {std::max(0.0f, low), std::min(static_cast<float>(rope_dim - 1), high)};
}

RopeTable::RopeTable(int rope_dim, float theta_base, int64_t max_positions)
    : RopeTable(PlainParams(rope_dim, theta_base), max_positions) {}

RopeTable::RopeTable(const RopeParams& params, int64_t max_positions)
    : rope_dim_(params.rope_dim), mode_(params.mode), max_positions_(max_positions) {
  CheckParams(params, max_positions);
  const int num_pairs = rope_dim_ / 2;
  const std::vector<float> mix = YarnMix(params);
  const float mscale = Magnitude(params);
  const bool has_factors = !params.freq_factors.empty();
  const float theta_scale = std::pow(params.theta_base, -2.0f / static_cast<float>(rope_dim_));
  cos_sin_.resize(static_cast<size_t>(max_positions) * static_cast<size_t>(rope_dim_));
  for (int64_t pos = 0; pos < max_positions; ++pos) {
    float* row = cos_sin_.data() + pos * rope_dim_;
    float theta = static_cast<float>(pos);
    for (int i = 0; i < num_pairs; ++i) {
      const float extrap = theta / (has_factors ? params.freq_factors[i] : 1.0f);
      const float interp = params.freq_scale * extrap;
      float angle = interp;
      if (params.ext_factor != 0.0f) angle = interp * (1.0f - mix[i]) + extrap * mix[i];
      row[2 * i] = std::cos(angle) * mscale;
      row[2 * i + 1] = std::sin(angle) * mscale;
      theta *= theta_scale;
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
  const bool neox = table.mode() == RopeMode::kNeox;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* cos_sin = table.CosSin(positions[t]);
    for (int h = 0; h < num_heads; ++h) {
      float* v = x.data() + (t * num_heads + h) * head_dim;
      if (neox) {
        RotatePairs<1>(cos_sin, num_pairs, num_pairs, v);
      } else {
        RotatePairs<2>(cos_sin, num_pairs, 1, v);
      }
    }
  }
}

}  // namespace tessera::kernels::cpu
