// RoPE kernel on the emulator vs the CPU engine's ApplyRope (kernels/cpu/rope.h) with the same
// RopeTable: normal (GGUF llama) and NeoX pairing, full and partial rotary dims, plain, linear,
// Llama 3 frequency-factor and YaRN scaling, head dims 64 and 128, GQA ratios 1, 3 and 8, token
// counts 1, 3 and 17, bf16 / f16 / f32 activations, under every test schedule.
//
// Tolerance: none. The kernel reads the CPU's cos/sin table and performs the CPU's rotation in the
// same f32 operations (products through __fmul_rn, no contraction), then rounds once to T; the
// reference runs ApplyRope on the f32 values of the T inputs and rounds its result to T.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/rope.h"
#include "kernels/cuda/rope.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using kernels::cpu::RopeMode;
using kernels::cpu::RopeParams;
using kernels::cpu::RopeTable;
using simt::DeviceBuffer;

constexpr int kMaxPositions = 4096;

enum class Scaling { kNone, kLinear, kLlama3Factors, kYarn };

RopeParams MakeParams(int rope_dim, RopeMode mode, Scaling scaling, std::mt19937& rng) {
  RopeParams p;
  p.rope_dim = rope_dim;
  p.mode = mode;
  p.theta_base = 500000.0f;
  if (scaling == Scaling::kLinear) p.freq_scale = 0.25f;
  if (scaling == Scaling::kLlama3Factors) {
    std::uniform_real_distribution<float> factor(1.0f, 8.0f);
    for (int i = 0; i < rope_dim / 2; ++i) p.freq_factors.push_back(factor(rng));
  }
  if (scaling == Scaling::kYarn) {
    p.freq_scale = 0.25f;
    p.ext_factor = 1.0f;
    p.original_context_length = 1024;
  }
  return p;
}

template <typename T>
uint32_t BitsOf(T x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(T));
  return bits;
}

struct RopeCase {
  int num_tokens, num_heads, num_kv_heads, head_dim, rope_dim;
  RopeMode mode;
  Scaling scaling;
};

// The last token (when more than one) gets an out-of-range position and must stay unchanged.
template <typename T>
void CheckRope(const simt::Schedule& schedule, const RopeCase& c, std::mt19937& rng) {
  const RopeParams params = MakeParams(c.rope_dim, c.mode, c.scaling, rng);
  const RopeTable table(params, kMaxPositions);
  const std::vector<float> cos_sin(table.CosSin(0), table.CosSin(0) + kMaxPositions * c.rope_dim);
  std::uniform_int_distribution<int32_t> pick(0, kMaxPositions - 1);
  std::vector<int32_t> positions(c.num_tokens);
  for (int32_t& p : positions) p = pick(rng);
  positions[0] = kMaxPositions - 1;  // the table's last row, next to its guard page
  if (c.num_tokens > 1) positions.back() = (c.num_tokens % 2) ? kMaxPositions : -1;
  const bool last_skipped = c.num_tokens > 1;

  const size_t q_size = size_t(c.num_tokens) * c.num_heads * c.head_dim;
  const size_t k_size = size_t(c.num_tokens) * c.num_kv_heads * c.head_dim;
  const std::vector<T> q = simt::Convert<T>(simt::RandomFloats(q_size, rng, -3, 3));
  const std::vector<T> k = simt::Convert<T>(simt::RandomFloats(k_size, rng, -3, 3));
  DeviceBuffer<T> d_q{std::span<const T>(q)}, d_k{std::span<const T>(k)};
  DeviceBuffer<int32_t> d_positions{std::span<const int32_t>(positions)};
  DeviceBuffer<float> d_cos_sin{std::span<const float>(cos_sin)};
  simt::TestLauncher launcher(schedule);
  const RopeStyle style = c.mode == RopeMode::kNeox ? RopeStyle::kNeox : RopeStyle::kNormal;
  ASSERT_TRUE(LaunchRope(launcher, style, d_q.get(), c.num_kv_heads > 0 ? d_k.get() : nullptr,
                         static_cast<const int32_t*>(d_positions.get()),
                         static_cast<const float*>(d_cos_sin.get()), kMaxPositions, c.num_tokens,
                         c.num_heads, c.num_kv_heads, c.head_dim, c.rope_dim)
                  .ok());

  // Reference on the in-range tokens; the skipped token keeps its input.
  const int rotated = last_skipped ? c.num_tokens - 1 : c.num_tokens;
  const std::span<const int32_t> rotated_positions(positions.data(), rotated);
  for (auto [input, device, heads] : {std::tuple{&q, &d_q, c.num_heads},
                                      std::tuple{&k, &d_k, c.num_kv_heads}}) {
    if (heads == 0) continue;
    std::vector<float> expected = simt::ToFloats<T>(*input);
    kernels::cpu::ApplyRope(table, rotated_positions, heads, c.head_dim, expected);
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(BitsOf((*device)[i]), BitsOf(simt::FloatTo<T>(expected[i])))
          << "tokens=" << c.num_tokens << " heads=" << heads << " head_dim=" << c.head_dim
          << " rope_dim=" << c.rope_dim << " mode=" << kernels::cpu::RopeModeName(c.mode)
          << " scaling=" << static_cast<int>(c.scaling) << " element " << i
          << " token " << i / (size_t(heads) * c.head_dim);
    }
  }
}

class RopeKernelTest : public simt::KernelTest {};

TEST_P(RopeKernelTest, MatchesCpuApplyRopeBitForBit) {
  std::mt19937 rng(4321);
  // {tokens, heads, kv heads, head_dim, rope_dim}: GQA 1, 3, 8; full and partial rotary dims;
  // head dims 64, 80, 128, 256.
  const RopeCase shapes[] = {{1, 4, 4, 64, 64, RopeMode::kNormal, Scaling::kNone},
                             {3, 6, 2, 128, 128, RopeMode::kNormal, Scaling::kNone},
                             {17, 8, 1, 64, 32, RopeMode::kNormal, Scaling::kNone},
                             {3, 3, 1, 128, 64, RopeMode::kNormal, Scaling::kNone},
                             {2, 2, 2, 64, 2, RopeMode::kNormal, Scaling::kNone},
                             // Qwen3-Next / Qwen3.5 full attention: head_dim 256, rope_dim 64
                             // (partial_rotary_factor 0.25; NeoX in those models), GQA 8.
                             {5, 16, 2, 256, 64, RopeMode::kNormal, Scaling::kNone},
                             {3, 2, 2, 80, 80, RopeMode::kNormal, Scaling::kNone}};
  for (RopeCase c : shapes) {
    for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
      for (Scaling scaling :
           {Scaling::kNone, Scaling::kLinear, Scaling::kLlama3Factors, Scaling::kYarn}) {
        c.mode = mode;
        c.scaling = scaling;
        CheckRope<__nv_bfloat16>(GetParam(), c, rng);
        if (scaling == Scaling::kNone) {
          CheckRope<__half>(GetParam(), c, rng);
          CheckRope<float>(GetParam(), c, rng);
        }
      }
    }
  }
}

TEST_P(RopeKernelTest, QueriesOnly) {
  std::mt19937 rng(8);
  const RopeCase c{3, 4, 0, 64, 64, RopeMode::kNeox, Scaling::kNone};
  CheckRope<float>(GetParam(), c, rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, RopeKernelTest, ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
