// Scaled RoPE tables (linear, YaRN, frequency factors) against HF transformers' RoPE
// initialisation (tools/oracle/rope_reference.py), plus the exact identities ggml's arithmetic
// gives: unscaled stays bit-identical, linear factor 2 at 2p equals unscaled at p, YaRN's
// extreme pairs are plain / interpolated angles.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/rope.h"
#include "tests/unit/kernels/rope_reference.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using ::tessera::rope_reference::ReadRopeReference;
using ::tessera::rope_reference::Tolerance;
using ::tessera::rope_reference::RopeReferenceCase;
using testing::RandomVector;

// Plain RoPE parameters for the tests to adjust (designated initializers would leave fields out).
RopeParams Plain(int rope_dim, float theta_base) {
  RopeParams p;
  p.rope_dim = rope_dim;
  p.theta_base = theta_base;
  return p;
}

// The kernel-level parameters ggml_rope_ext receives for a GGUF description. llama.cpp's own
// YaRN attn_factor adjustment (get_mscale / (1 + 0.1 ln f), ~1) lives in the runner and is
// tested there; here attn_factor is the GGUF value.
RopeParams ParamsFor(const RopeReferenceCase& c) {
  RopeParams p = Plain(c.rope_dim, static_cast<float>(c.theta));
  p.attn_factor = static_cast<float>(c.attn_factor);
  p.original_context_length = c.original_context_length;
  p.beta_fast = static_cast<float>(c.beta_fast);
  p.beta_slow = static_cast<float>(c.beta_slow);
  p.freq_factors = c.rope_freqs;
  if (c.scaling_type != "none") p.freq_scale = 1.0f / static_cast<float>(c.factor);
  if (c.scaling_type == "yarn") p.ext_factor = 1.0f;
  return p;
}

TEST(CpuRopeScalingTest, TablesMatchTransformersWithinMeasuredTolerance) {
  const std::vector<RopeReferenceCase> cases = ReadRopeReference();
  ASSERT_EQ(cases.size(), 5u) << "run tools/oracle/rope_reference.py";
  for (const RopeReferenceCase& c : cases) {
    const RopeTable table(ParamsFor(c), c.positions.back() + 1);
    double worst = 0.0, worst_small = 0.0, worst_slope = 0.0;
    double worst_ratio = 0.0;  // |diff| / Tolerance(pos): must stay <= 1
    std::string worst_where;
    for (size_t p = 0; p < c.positions.size(); ++p) {
      const int32_t pos = c.positions[p];
      const float* ours = table.CosSin(pos);
      for (int j = 0; j < c.rope_dim; ++j) {
        const double diff = std::abs(ours[j] - c.cos_sin[p][j]);
        worst = std::max(worst, diff);
        if (pos < 64) worst_small = std::max(worst_small, diff);
        if (pos >= 64) worst_slope = std::max(worst_slope, diff / pos);
        if (diff / Tolerance(pos) > worst_ratio) {
          worst_ratio = diff / Tolerance(pos);
          worst_where = "pos " + std::to_string(pos) + " value " + std::to_string(j);
        }
      }
    }
    std::printf("%-20s max |ours - HF| %.3g, below pos 64 %.3g, max |diff| / pos (>= 64) %.3g\n",
                c.name.c_str(), worst, worst_small, worst_slope);
    EXPECT_LE(worst_ratio, 1.0) << c.name << " at " << worst_where;
  }
}

// ApplyRope with a scaled table rotates (and, for YaRN, scales) like the reference cos/sin do.
TEST(CpuRopeScalingTest, ApplyRopeRotatesByReferenceAngles) {
  const std::vector<RopeReferenceCase> cases = ReadRopeReference();
  ASSERT_FALSE(cases.empty());
  for (const RopeReferenceCase& c : cases) {
    const RopeTable table(ParamsFor(c), c.positions.back() + 1);
    const int head_dim = c.rope_dim + 6;  // a non-rotated tail too
    const int num_heads = 3;
    const int num_tokens = static_cast<int>(c.positions.size());
    std::vector<float> x = RandomVector(num_tokens * num_heads * head_dim, c.rope_dim);
    const std::vector<float> input = x;
    ApplyRope(table, c.positions, num_heads, head_dim, x);
    for (int t = 0; t < num_tokens; ++t) {
      for (int h = 0; h < num_heads; ++h) {
        const size_t base = (static_cast<size_t>(t) * num_heads + h) * head_dim;
        for (int i = 0; i < c.rope_dim / 2; ++i) {
          const double cs = c.cos_sin[t][2 * i], sn = c.cos_sin[t][2 * i + 1];
          const double x0 = input[base + 2 * i], x1 = input[base + 2 * i + 1];
          // |x| < 1, so each output is off by at most the sum of the two cos/sin errors.
          const double tolerance = 2 * Tolerance(c.positions[t]);
          ASSERT_NEAR(x[base + 2 * i], x0 * cs - x1 * sn, tolerance) << c.name;
          ASSERT_NEAR(x[base + 2 * i + 1], x0 * sn + x1 * cs, tolerance) << c.name;
        }
        for (int d = c.rope_dim; d < head_dim; ++d) ASSERT_EQ(x[base + d], input[base + d]);
      }
    }
  }
}

bool RowsBitEqual(const RopeTable& a, int64_t pos_a, const RopeTable& b, int64_t pos_b) {
  return std::memcmp(a.CosSin(pos_a), b.CosSin(pos_b), a.rope_dim() * sizeof(float)) == 0;
}

TEST(CpuRopeScalingTest, NeutralParametersAreBitIdenticalToPlainRope) {
  const RopeTable plain(64, 100000.0f, 2048);
  RopeParams params = Plain(64, 100000.0f);
  params.freq_scale = 1.0f;
  params.attn_factor = 1.0f;
  params.freq_factors.assign(32, 1.0f);
  const RopeTable neutral(params, 2048);
  for (int64_t pos = 0; pos < 2048; ++pos) ASSERT_TRUE(RowsBitEqual(plain, pos, neutral, pos));
}

// freq_scale 0.5 multiplies ggml's angle by an exact power of two, so position 2p of the scaled
// table reproduces position p of the plain one to the bit; frequency factors of 2 divide it by
// the same power of two.
TEST(CpuRopeScalingTest, LinearFactorTwoAtTwicePositionEqualsPlainAtPosition) {
  const RopeTable plain(64, 10000.0f, 1024);
  RopeParams linear_params = Plain(64, 10000.0f);
  linear_params.freq_scale = 0.5f;
  const RopeTable linear(linear_params, 2048);
  RopeParams factor_params = Plain(64, 10000.0f);
  factor_params.freq_factors.assign(32, 2.0f);
  const RopeTable factors(factor_params, 2048);
  for (int64_t pos = 0; pos < 1024; ++pos) {
    ASSERT_TRUE(RowsBitEqual(linear, 2 * pos, plain, pos)) << pos;
    ASSERT_TRUE(RowsBitEqual(factors, 2 * pos, plain, pos)) << pos;
  }
  EXPECT_FALSE(RowsBitEqual(linear, 3, plain, 3));
}

// Each pair's angle is divided by its own factor (ggml: theta / freq_factors[i]).
TEST(CpuRopeScalingTest, FrequencyFactorsDividePerPair) {
  std::vector<float> factors(8);
  for (int i = 0; i < 8; ++i) factors[i] = 1.0f + 0.75f * static_cast<float>(i);
  RopeParams params = Plain(16, 500000.0f);
  params.freq_factors = factors;
  const RopeTable table(params, 300);
  const float theta_scale = std::pow(500000.0f, -2.0f / 16.0f);
  for (int pos : {0, 1, 5, 299}) {
    float theta = static_cast<float>(pos);
    for (int i = 0; i < 8; ++i) {
      ASSERT_EQ(table.CosSin(pos)[2 * i], std::cos(theta / factors[i])) << pos << " " << i;
      ASSERT_EQ(table.CosSin(pos)[2 * i + 1], std::sin(theta / factors[i])) << pos << " " << i;
      theta *= theta_scale;
    }
  }
}

// d(n) = 128 ln(32768 / (2 pi n)) / (2 ln 1e6): d(32) = 23.596, d(1) = 39.651 (computed in f64;
// HF's find_correction_range gives the same floor/ceil).
TEST(CpuRopeScalingTest, YarnCorrectionDimsMatchTheFormula) {
  const auto qwen = YarnCorrectionDims(128, 32768, 1e6f, 32.0f, 1.0f);
  EXPECT_EQ(qwen[0], 23.0f);
  EXPECT_EQ(qwen[1], 40.0f);
  // d(16) = 10.47, d(2) = 17.70 for rope_dim 64, 2048, 1e4.
  const auto small = YarnCorrectionDims(64, 2048, 1e4f, 16.0f, 2.0f);
  EXPECT_EQ(small[0], 10.0f);
  EXPECT_EQ(small[1], 18.0f);
  // Clamped to [0, rope_dim - 1]: a tiny original context puts every pair past beta_fast.
  const auto clamped = YarnCorrectionDims(8, 4, 1e4f, 32.0f, 1e-9f);
  EXPECT_EQ(clamped[0], 0.0f);
  EXPECT_EQ(clamped[1], 7.0f);
}

// Below the ramp YaRN keeps the plain angle, above it uses the linear one, and every value is
// scaled by mscale = 1 + 0.1 ln(factor) — exactly, since the mix weights there are 1 and 0.
TEST(CpuRopeScalingTest, YarnIsPlainBelowTheRampAndLinearAboveIt) {
  const int64_t n = 600;
  RopeParams linear_params = Plain(64, 10000.0f);
  linear_params.freq_scale = 0.25f;
  RopeParams yarn_params = linear_params;
  yarn_params.ext_factor = 1.0f;
  yarn_params.original_context_length = 4096;
  const RopeTable yarn(yarn_params, n);
  const RopeTable plain(64, 10000.0f, n);
  const RopeTable linear(linear_params, n);
  const auto [low, high] = YarnCorrectionDims(64, 4096, 10000.0f, 32.0f, 1.0f);
  ASSERT_LT(low, high);
  const float mscale = 1.0f + 0.1f * std::log(4.0f);
  for (int64_t pos = 0; pos < n; ++pos) {
    for (int j = 0; j < 64; ++j) {
      const int pair = j / 2;
      if (pair <= low) {
        ASSERT_EQ(yarn.CosSin(pos)[j], plain.CosSin(pos)[j] * mscale) << pos << " " << j;
      }
      if (pair >= high) {
        ASSERT_EQ(yarn.CosSin(pos)[j], linear.CosSin(pos)[j] * mscale) << pos << " " << j;
      }
    }
  }
  // In between, the angle lies between the two.
  const int mid = static_cast<int>((low + high) / 2);
  const float c = yarn.CosSin(37)[2 * mid] / mscale;
  EXPECT_GT(c, std::min(plain.CosSin(37)[2 * mid], linear.CosSin(37)[2 * mid]) - 1e-6f);
  EXPECT_LT(c, std::max(plain.CosSin(37)[2 * mid], linear.CosSin(37)[2 * mid]) + 1e-6f);
}

TEST(CpuRopeScalingTest, AttnFactorScalesEveryValue) {
  const RopeTable plain(32, 10000.0f, 100);
  RopeParams params = Plain(32, 10000.0f);
  params.attn_factor = 0.5f;
  const RopeTable scaled(params, 100);
  for (int64_t pos = 0; pos < 100; ++pos) {
    for (int j = 0; j < 32; ++j) ASSERT_EQ(scaled.CosSin(pos)[j], plain.CosSin(pos)[j] * 0.5f);
  }
}

TEST(CpuRopeScalingDeathTest, RejectsBadParameters) {
  RopeParams short_factors = Plain(8, 10000.0f);
  short_factors.freq_factors = {1.0f, 2.0f};
  EXPECT_DEATH(RopeTable(short_factors, 4), "freq_factors must hold rope_dim / 2 values");
  RopeParams zero_factor = Plain(4, 10000.0f);
  zero_factor.freq_factors = {1.0f, 0.0f};
  EXPECT_DEATH(RopeTable(zero_factor, 4), "finite and positive");
  RopeParams yarn_without_context = Plain(4, 10000.0f);
  yarn_without_context.ext_factor = 1.0f;
  EXPECT_DEATH(RopeTable(yarn_without_context, 4), "original_context_length must be positive");
}

}  // namespace
}  // namespace tessera::kernels::cpu
