// NeoX-mode RoPE (pairs (i, i + rope_dim / 2), llama.cpp's mode for qwen2/qwen3) against a
// straightforward scalar reference on random inputs and awkward sizes, and the identity that ties
// it to normal mode: NeoX on x = normal on de-interleaved x, interleaved back, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/rope.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::RandomVector;

// |ours - f64 reference| bound for inputs in [-1, 1] at positions <= 97. Measured 2026-11-22 on
// the 2-core Xeon (the test prints it; the kernel is scalar, so every ISA gives the same): 1.46e-5
// over all shapes and both thetas. The bound leaves 2x.
constexpr double kMaxNeoxError = 3e-5;

RopeParams Params(int rope_dim, float theta_base, RopeMode mode) {
  RopeParams p;
  p.rope_dim = rope_dim;
  p.theta_base = theta_base;
  p.mode = mode;
  return p;
}

// A scaled variant (YaRN with uneven frequency factors): the pairing must not care where the
// cos/sin came from.
RopeParams ScaledParams(int rope_dim, RopeMode mode) {
  RopeParams p = Params(rope_dim, 1000000.0f, mode);
  p.freq_scale = 0.25f;
  p.ext_factor = 1.0f;
  p.original_context_length = 64;
  for (int i = 0; i < rope_dim / 2; ++i) p.freq_factors.push_back(1.0f + 0.25f * (i % 5));
  return p;
}

std::vector<int32_t> Positions(int num_tokens) {
  std::vector<int32_t> positions(num_tokens);
  for (int t = 0; t < num_tokens; ++t) positions[t] = t;
  return positions;
}

// The textbook NeoX rotation in f64 with f64 angles pos * theta^(-2i / rope_dim): independent of
// the kernel's table and of ggml's f32 recurrence.
void ReferenceNeox(std::span<const int32_t> positions, int num_heads, int head_dim, int rope_dim,
                   double theta_base, std::span<float> x) {
  const int half = rope_dim / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int h = 0; h < num_heads; ++h) {
      float* v = x.data() + (t * num_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = positions[t] * std::pow(theta_base, -2.0 * i / rope_dim);
        const double x0 = v[i];
        const double x1 = v[i + half];
        v[i] = static_cast<float>(x0 * std::cos(angle) - x1 * std::sin(angle));
        v[i + half] = static_cast<float>(x0 * std::sin(angle) + x1 * std::cos(angle));
      }
    }
  }
}

// Reorders each head's first rope_dim values: de-interleaving sends x[i] -> x[2i] and
// x[i + rope_dim/2] -> x[2i + 1] (the NeoX layout into the normal one); interleaving undoes it.
// The tail [rope_dim, head_dim) stays put.
std::vector<float> PermuteHeads(const std::vector<float>& x, int head_dim, int rope_dim,
                                bool to_normal) {
  std::vector<float> out = x;
  const int half = rope_dim / 2;
  for (size_t base = 0; base < x.size(); base += head_dim) {
    for (int i = 0; i < half; ++i) {
      for (int j = 0; j < 2; ++j) {
        const size_t neox = base + j * half + i;
        const size_t normal = base + 2 * i + j;
        if (to_normal) {
          out[normal] = x[neox];
        } else {
          out[neox] = x[normal];
        }
      }
    }
  }
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double{a[i]} - b[i]));
  return worst;
}

struct Shape {
  int head_dim;
  int rope_dim;
  int num_heads;
};

// head_dim 64 / 128, full and partial rotation (rope_dim a non-power of two too), odd head counts.
const Shape kShapes[] = {{64, 64, 1}, {64, 64, 3}, {64, 32, 7}, {64, 22, 3},
                         {128, 128, 5}, {128, 64, 2}, {128, 90, 3}};

TEST(CpuRopeNeoxTest, MatchesScalarReference) {
  const std::vector<int32_t> positions = Positions(98);  // 0..97
  double worst = 0.0;
  for (const Shape& s : kShapes) {
    for (float theta : {10000.0f, 1000000.0f}) {
      SCOPED_TRACE("head_dim " + std::to_string(s.head_dim) + " rope_dim " +
                   std::to_string(s.rope_dim) + " heads " + std::to_string(s.num_heads) +
                   " theta " + std::to_string(theta));
      const RopeTable table(Params(s.rope_dim, theta, RopeMode::kNeox), 98);
      ASSERT_EQ(table.mode(), RopeMode::kNeox);
      const size_t n = positions.size() * s.num_heads * s.head_dim;
      std::vector<float> x = RandomVector(n, s.head_dim * 1000 + s.rope_dim * 10 + s.num_heads);
      std::vector<float> ref = x;
      const std::vector<float> input = x;
      ApplyRope(table, positions, s.num_heads, s.head_dim, x);
      ReferenceNeox(positions, s.num_heads, s.head_dim, s.rope_dim, theta, ref);
      // ggml's incremental f32 angles carry ~i ulp of pair i's angle pos * s^i, so the error
      // grows with the position: ~(max_i i s^i) * 97 * 6e-8 ~ 1e-5 rad for theta 1e6.
      const double diff = MaxAbsDiff(x, ref);
      worst = std::max(worst, diff);
      ASSERT_LE(diff, kMaxNeoxError);
      // The tail is copied untouched, bit for bit.
      for (size_t base = 0; base < n; base += s.head_dim) {
        for (int d = s.rope_dim; d < s.head_dim; ++d) {
          ASSERT_EQ(std::memcmp(&x[base + d], &input[base + d], sizeof(float)), 0) << d;
        }
      }
    }
  }
  std::printf("max |neox - f64 reference| over all shapes, positions 0..97: %.3g\n", worst);
}

// ggml's arithmetic: pair i takes the table's cos/sin for pair i (the same as normal mode), and
// the rotation is x0 * c - x1 * s, x0 * s + x1 * c in f32 — checked to the bit on a scaled table.
TEST(CpuRopeNeoxTest, RotatesPairIByTheTablesCosSinForPairI) {
  const int head_dim = 128, rope_dim = 90, num_heads = 3;
  const RopeTable table(ScaledParams(rope_dim, RopeMode::kNeox), 98);
  const std::vector<int32_t> positions = Positions(98);
  std::vector<float> x = RandomVector(98 * num_heads * head_dim, 77);
  std::vector<float> expected = x;
  ApplyRope(table, positions, num_heads, head_dim, x);
  for (size_t t = 0; t < positions.size(); ++t) {
    const float* cs = table.CosSin(positions[t]);
    for (int h = 0; h < num_heads; ++h) {
      float* v = expected.data() + (t * num_heads + h) * head_dim;
      for (int i = 0; i < rope_dim / 2; ++i) {
        const float x0 = v[i], x1 = v[i + rope_dim / 2];
        v[i] = x0 * cs[2 * i] - x1 * cs[2 * i + 1];
        v[i + rope_dim / 2] = x0 * cs[2 * i + 1] + x1 * cs[2 * i];
      }
    }
  }
  EXPECT_TRUE(BitEqual(x, expected));
}

// The property that ties the modes together (and the layouts of llama.cpp's converter): NeoX RoPE
// on x = interleave(normal RoPE on deinterleave(x)), bit for bit, plain and scaled.
TEST(CpuRopeNeoxTest, EqualsNormalModeOnDeinterleavedInput) {
  const std::vector<int32_t> positions = Positions(98);
  for (const Shape& s : kShapes) {
    for (bool scaled : {false, true}) {
      SCOPED_TRACE("head_dim " + std::to_string(s.head_dim) + " rope_dim " +
                   std::to_string(s.rope_dim) + (scaled ? " scaled" : " plain"));
      const RopeParams neox_params = scaled ? ScaledParams(s.rope_dim, RopeMode::kNeox)
                                            : Params(s.rope_dim, 10000.0f, RopeMode::kNeox);
      RopeParams normal_params = neox_params;
      normal_params.mode = RopeMode::kNormal;
      const RopeTable neox(neox_params, 98), normal(normal_params, 98);
      const std::vector<float> x =
          RandomVector(positions.size() * s.num_heads * s.head_dim, 500 + s.rope_dim);
      std::vector<float> via_neox = x;
      ApplyRope(neox, positions, s.num_heads, s.head_dim, via_neox);
      std::vector<float> via_normal = PermuteHeads(x, s.head_dim, s.rope_dim, true);
      ApplyRope(normal, positions, s.num_heads, s.head_dim, via_normal);
      via_normal = PermuteHeads(via_normal, s.head_dim, s.rope_dim, false);
      ASSERT_TRUE(BitEqual(via_neox, via_normal));
      // And the modes really differ on the same input (past position 0, where both are identity).
      std::vector<float> normal_on_x = x;
      ApplyRope(normal, positions, s.num_heads, s.head_dim, normal_on_x);
      EXPECT_FALSE(testing::AllNear(normal_on_x, via_neox, 1e-3));
    }
  }
}

TEST(CpuRopeNeoxTest, PartialRotaryPairsHalvesAndLeavesTail) {
  const RopeTable table(Params(4, 10000.0f, RopeMode::kNeox), 8);
  std::vector<float> x = {1, 1, 0, 0, 5, 6};  // head_dim 6, rope_dim 4: pairs (0, 2), (1, 3)
  const std::vector<int32_t> pos = {1};
  ApplyRope(table, pos, 1, 6, x);
  // Pair 0 rotates by 1 rad, pair 1 by 1 * 10000^(-2/4) = 0.01 rad.
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[2], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[1], std::cos(0.01), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.01), 1e-6);
  EXPECT_EQ(x[4], 5.0f);
  EXPECT_EQ(x[5], 6.0f);
}

TEST(CpuRopeNeoxTest, ModeDefaultsToNormalAndIsNamed) {
  EXPECT_EQ(RopeParams().mode, RopeMode::kNormal);
  EXPECT_EQ(RopeTable(8, 10000.0f, 4).mode(), RopeMode::kNormal);
  EXPECT_EQ(RopeTable(Params(8, 10000.0f, RopeMode::kNeox), 4).mode(), RopeMode::kNeox);
  EXPECT_EQ(RopeModeName(RopeMode::kNormal), "normal");
  EXPECT_EQ(RopeModeName(RopeMode::kNeox), "neox");
}

}  // namespace
}  // namespace tessera::kernels::cpu
