// The fused bias + RoPE + KV write kernel (rope_kv_write.cuh, the one the cuda runner launches) on
// the emulator against the CPU engine, with no tolerance: q and k as kernels::cpu::ApplyRope
// rotates the T inputs with the same RopeTable, rounded once to T (after T(x + bias) when the
// layer has biases); every mapped slot of both pools holding its token's rotated k and v bit for
// bit, padding rows (slot -1) writing nothing and every other slot keeping its previous bits.
// Inputs given separately (q and k rotated in place) and as rows of one [q | k | v] projection
// output (q copied out, k rotated in the row); normal and NeoX pairing; full and partial rotary
// dims; plain, linear, Llama 3 frequency-factor and YaRN scaling; positions outside the table on
// either side (not rotated, still written) and the table's last row; shuffled slots; bf16 / f16 /
// f32; head dims 3 (rows of 18 bytes: the scalar copy), 6, 32, 64, 80, 128 and 256; GQA 1 to 8;
// under every test schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/rope.h"
#include "kernels/cuda/rope_kv_write.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using kernels::cpu::RopeMode;
using kernels::cpu::RopeParams;
using kernels::cpu::RopeTable;
using simt::DeviceBuffer;

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

struct FusedCase {
  int num_tokens, num_heads, num_kv_heads, head_dim, rope_dim;
  RopeMode mode = RopeMode::kNormal;
  Scaling scaling = Scaling::kNone;
  int pad = 0;          // extra elements per [q | k | v] row (16-byte vectors need 8 halves)
  bool biases = false;  // q/k/v biases, added before the rotation
  int num_slots = 0;    // slots in each pool; 0: 2 * num_tokens + 3
};

// kInPlace: q, k, v given separately (q and k rotated in place); kRows: rows of
// [q | k | v | pad] (a QKV projection's output), q copied out.
enum class Way { kInPlace, kRows };

template <typename T>
uint32_t Bits(T value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
std::vector<uint32_t> BitsOf(const std::vector<T>& values) {
  std::vector<uint32_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = Bits(values[i]);
  return bits;
}

// The first element whose bits differ, with its row (`row` elements each), or nothing.
template <typename T>
void ExpectSameBits(const std::vector<T>& got, const std::vector<T>& want, size_t row,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (Bits(got[i]) != Bits(want[i])) {
      ADD_FAILURE() << what << ": element " << i << " (row " << i / row << ") is "
                    << simt::AsFloat(got[i]) << ", want " << simt::AsFloat(want[i]);
      return;
    }
  }
}

// What the kernel must leave: q and k rotated (after their biases), both pools written.
template <typename T>
struct Expected {
  std::vector<T> q, k, k_pool, v_pool;
};

// x + bias per element, rounded to T (each of `rows` rows of bias.size()); no bias: x unchanged.
template <typename T>
std::vector<float> Biased(const std::vector<T>& x, const std::vector<T>* bias) {
  std::vector<float> out = simt::ToFloats<T>(x);
  if (bias == nullptr) return out;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = simt::AsFloat(simt::FloatTo<T>(out[i] + simt::AsFloat((*bias)[i % bias->size()])));
  }
  return out;
}

template <typename T>
Expected<T> Reference(const FusedCase& c, const RopeTable& table,
                      const std::vector<int32_t>& positions, const std::vector<int32_t>& slots,
                      const std::vector<T>& q, const std::vector<T>& k, const std::vector<T>& v,
                      const std::vector<T>& pool, const std::vector<T>* bq,
                      const std::vector<T>* bk, const std::vector<T>* bv) {
  const size_t q_row = size_t(c.num_heads) * c.head_dim;
  const size_t kv_row = size_t(c.num_kv_heads) * c.head_dim;
  std::vector<float> qf = Biased(q, bq), kf = Biased(k, bk);
  for (int t = 0; t < c.num_tokens; ++t) {
    if (positions[t] < 0 || positions[t] >= table.max_positions()) continue;  // not rotated
    const std::span<const int32_t> at(&positions[t], 1);
    kernels::cpu::ApplyRope(table, at, c.num_heads, c.head_dim,
                            std::span<float>(qf).subspan(t * q_row, q_row));
    kernels::cpu::ApplyRope(table, at, c.num_kv_heads, c.head_dim,
                            std::span<float>(kf).subspan(t * kv_row, kv_row));
  }
  Expected<T> expected{simt::Convert<T>(qf), simt::Convert<T>(kf), pool, pool};
  const std::vector<T> v_out = simt::Convert<T>(Biased(v, bv));
  for (int t = 0; t < c.num_tokens; ++t) {
    if (slots[t] < 0) continue;  // padding row
    const size_t slot = size_t(slots[t]) * kv_row;
    std::copy_n(expected.k.begin() + t * kv_row, kv_row, expected.k_pool.begin() + slot);
    std::copy_n(v_out.begin() + t * kv_row, kv_row, expected.v_pool.begin() + slot);
  }
  return expected;
}

// Runs `c` each way on random inputs over a table of `max_positions` rows and compares with the
// CPU reference. Tokens 5i + 3 sit outside the table (past its end or at -1), token 0 on its last
// row (next to its guard page), the others anywhere; tokens 3i + 1 are padding rows.
template <typename T>
void CheckFused(const simt::Schedule& schedule, const FusedCase& c, std::span<const Way> ways,
                int max_positions, std::mt19937& rng) {
  const size_t q_row = size_t(c.num_heads) * c.head_dim;
  const size_t kv_row = size_t(c.num_kv_heads) * c.head_dim;
  const int num_slots = c.num_slots > 0 ? c.num_slots : 2 * c.num_tokens + 3;
  ASSERT_LE(c.num_tokens, num_slots);
  const RopeTable table(MakeParams(c.rope_dim, c.mode, c.scaling, rng), max_positions);
  const std::vector<float> cos_sin(table.CosSin(0),
                                   table.CosSin(0) + size_t(max_positions) * c.rope_dim);
  std::vector<int32_t> slots(num_slots), positions(c.num_tokens);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(c.num_tokens);
  std::uniform_int_distribution<int32_t> position(0, max_positions - 1);
  for (int t = 0; t < c.num_tokens; ++t) {
    positions[t] = t % 5 == 3 ? (t % 2 ? max_positions : -1) : position(rng);
    if (t % 3 == 1) slots[t] = -1;
  }
  positions[0] = max_positions - 1;
  const std::vector<T> q = simt::Convert<T>(simt::RandomFloats(c.num_tokens * q_row, rng, -3, 3));
  const std::vector<T> k = simt::Convert<T>(simt::RandomFloats(c.num_tokens * kv_row, rng, -3, 3));
  const std::vector<T> v = simt::Convert<T>(simt::RandomFloats(c.num_tokens * kv_row, rng, -3, 3));
  const std::vector<T> pool = simt::Convert<T>(simt::RandomFloats(num_slots * kv_row, rng, 2, 3));
  const std::vector<T> bq = simt::Convert<T>(simt::RandomFloats(q_row, rng)),
                       bk = simt::Convert<T>(simt::RandomFloats(kv_row, rng)),
                       bv = simt::Convert<T>(simt::RandomFloats(kv_row, rng));
  const Expected<T> want =
      Reference(c, table, positions, slots, q, k, v, pool, c.biases ? &bq : nullptr,
                c.biases ? &bk : nullptr, c.biases ? &bv : nullptr);

  DeviceBuffer<int32_t> d_positions{std::span<const int32_t>(positions)},
      d_slots{std::span<const int32_t>(slots)};
  DeviceBuffer<float> d_cos_sin{std::span<const float>(cos_sin)};
  DeviceBuffer<T> d_bq{std::span<const T>(bq)}, d_bk{std::span<const T>(bk)},
      d_bv{std::span<const T>(bv)};
  simt::TestLauncher launcher(schedule);
  for (const Way way : ways) {
    const std::string what =
        std::string(way == Way::kInPlace ? "in place" : "from [q | k | v] rows") +
        ", tokens=" + std::to_string(c.num_tokens) + " heads=" + std::to_string(c.num_heads) +
        "/" + std::to_string(c.num_kv_heads) + " head_dim=" + std::to_string(c.head_dim) +
        " rope_dim=" + std::to_string(c.rope_dim) +
        " mode=" + std::string(kernels::cpu::RopeModeName(c.mode)) +
        " scaling=" + std::to_string(static_cast<int>(c.scaling));
    DeviceBuffer<T> d_q{std::span<const T>(q)}, d_k{std::span<const T>(k)},
        d_v{std::span<const T>(v)}, d_k_pool{std::span<const T>(pool)},
        d_v_pool{std::span<const T>(pool)};
    const int64_t stride = int64_t(q_row + 2 * kv_row) + c.pad;
    std::vector<T> fused_rows(c.num_tokens * stride, simt::FloatTo<T>(9.0f));
    for (int t = 0; t < c.num_tokens; ++t) {
      std::copy_n(q.begin() + t * q_row, q_row, fused_rows.begin() + t * stride);
      std::copy_n(k.begin() + t * kv_row, kv_row, fused_rows.begin() + t * stride + q_row);
      std::copy_n(v.begin() + t * kv_row, kv_row,
                  fused_rows.begin() + t * stride + q_row + kv_row);
    }
    DeviceBuffer<T> d_rows{std::span<const T>(fused_rows)};
    RopeKvWriteRows<T> rows =
        way == Way::kInPlace
            ? RopeKvWriteRows<T>{d_q.get(), d_q.get(), d_k.get(), d_v.get(), int64_t(q_row),
                                 int64_t(kv_row)}
            : RopeKvWriteRows<T>{d_rows.get(), d_q.get(), d_rows.get() + q_row,
                                 d_rows.get() + q_row + kv_row, stride, stride};
    if (c.biases) {
      rows.q_bias = d_bq.get();
      rows.k_bias = d_bk.get();
      rows.v_bias = d_bv.get();
    }
    const RopeStyle style = c.mode == RopeMode::kNeox ? RopeStyle::kNeox : RopeStyle::kNormal;
    ASSERT_TRUE(LaunchRopeKvWrite(launcher, style, rows, d_k_pool.get(), d_v_pool.get(),
                                  static_cast<const int32_t*>(d_positions.get()),
                                  static_cast<const int32_t*>(d_slots.get()),
                                  static_cast<const float*>(d_cos_sin.get()), max_positions,
                                  c.num_tokens, c.num_heads, c.num_kv_heads, c.head_dim,
                                  c.rope_dim)
                    .ok())
        << what;
    std::vector<T> k_out = d_k.ToHost();
    if (way == Way::kRows) {  // the rotated k lives in the fused rows
      const std::vector<T> rows_out = d_rows.ToHost();
      for (int t = 0; t < c.num_tokens; ++t) {
        std::copy_n(rows_out.begin() + t * stride + q_row, kv_row, k_out.begin() + t * kv_row);
      }
    }
    const std::vector<T> q_out = d_q.ToHost(), k_pool = d_k_pool.ToHost(),
                         v_pool = d_v_pool.ToHost();
    ExpectSameBits(q_out, want.q, q_row, what + ": q");
    ExpectSameBits(k_out, want.k, kv_row, what + ": k");
    ExpectSameBits(k_pool, want.k_pool, kv_row, what + ": k_pool");
    ExpectSameBits(v_pool, want.v_pool, kv_row, what + ": v_pool");
    // Neither check above can pass by doing nothing.
    EXPECT_NE(BitsOf(k_pool), BitsOf(pool)) << what << ": nothing was written";
    EXPECT_NE(BitsOf(q_out), BitsOf(q)) << what << ": nothing was rotated";
  }
}

constexpr Way kBothWays[] = {Way::kInPlace, Way::kRows};
constexpr Way kInPlaceOnly[] = {Way::kInPlace};

class RopeKvWriteKernelTest : public simt::KernelTest {};

TEST_P(RopeKvWriteKernelTest, MatchesTheCpuRopeAndSlotWrites) {
  std::mt19937 rng(77);
  constexpr int kPositions = 64;
  CheckFused<__nv_bfloat16>(GetParam(), {17, 8, 2, 128, 128}, kBothWays, kPositions, rng);
  CheckFused<__half>(GetParam(), {5, 4, 4, 64, 32, RopeMode::kNeox, Scaling::kNone, 8},
                     kBothWays, kPositions, rng);
  CheckFused<float>(GetParam(), {9, 2, 1, 32, 32, RopeMode::kNeox, Scaling::kNone, 3},  // scalar
                    kBothWays, kPositions, rng);
  CheckFused<__nv_bfloat16>(GetParam(), {4, 3, 3, 6, 4}, kBothWays, kPositions, rng);  // scalar
  CheckFused<float>(GetParam(), {1, 4, 1, 64, 64, RopeMode::kNormal, Scaling::kNone, 4},
                    kBothWays, kPositions, rng);
}

// Qwen2's q/k/v biases: T(x + bias) first, then the rotation of those values.
TEST_P(RopeKvWriteKernelTest, AddsTheBiasesFirst) {
  std::mt19937 rng(78);
  constexpr int kPositions = 64;
  CheckFused<__nv_bfloat16>(GetParam(),
                            {6, 4, 2, 64, 64, RopeMode::kNeox, Scaling::kNone, 0, true},
                            kBothWays, kPositions, rng);
  CheckFused<__half>(GetParam(), {3, 2, 1, 32, 16, RopeMode::kNormal, Scaling::kNone, 8, true},
                     kBothWays, kPositions, rng);
  CheckFused<float>(GetParam(), {4, 3, 3, 6, 4, RopeMode::kNormal, Scaling::kNone, 1, true},
                    kBothWays, kPositions, rng);  // scalar
}

// Every scaling the CPU engine supports (the table carries it), both pairings, full and partial
// rotary dims, GQA 1, 3 and 8, head dims 64, 80, 128 and 256.
TEST_P(RopeKvWriteKernelTest, RotatesAsTheCpuApplyRopeForEveryScaling) {
  std::mt19937 rng(4321);
  constexpr int kPositions = 4096;
  // {tokens, heads, kv heads, head_dim, rope_dim}.
  const FusedCase shapes[] = {{1, 4, 4, 64, 64},    {3, 6, 2, 128, 128}, {17, 8, 1, 64, 32},
                              {3, 3, 1, 128, 64},   {2, 2, 2, 64, 2},
                              // Qwen3-Next / Qwen3.5 full attention: head_dim 256, rope_dim 64
                              // (partial_rotary_factor 0.25; NeoX in those models), GQA 8.
                              {5, 16, 2, 256, 64},  {3, 2, 2, 80, 80}};
  for (FusedCase c : shapes) {
    for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
      for (Scaling scaling :
           {Scaling::kNone, Scaling::kLinear, Scaling::kLlama3Factors, Scaling::kYarn}) {
        c.mode = mode;
        c.scaling = scaling;
        CheckFused<__nv_bfloat16>(GetParam(), c, kInPlaceOnly, kPositions, rng);
        if (scaling == Scaling::kNone) {
          CheckFused<__half>(GetParam(), c, kInPlaceOnly, kPositions, rng);
          CheckFused<float>(GetParam(), c, kInPlaceOnly, kPositions, rng);
        }
      }
    }
  }
}

// Rows land bit for bit in the slots the mapping names (shuffled across pools of 1 to 128
// slots, up to 97 tokens), padding rows write nothing, and every other slot of both pools keeps
// its bits; a row of 3 x 3 elements (not whole 16-byte vectors: the scalar copy).
TEST_P(RopeKvWriteKernelTest, WritesMappedSlotsOnly) {
  std::mt19937 rng(79);
  constexpr int kPositions = 64;
  // {tokens, heads, kv heads, head_dim, rope_dim} and the pool's slots.
  const FusedCase cases[] = {
      {1, 1, 1, 64, 2, RopeMode::kNormal, Scaling::kNone, 0, false, 1},
      {3, 2, 2, 128, 2, RopeMode::kNormal, Scaling::kNone, 0, false, 4},
      {17, 2, 2, 64, 2, RopeMode::kNormal, Scaling::kNone, 0, false, 48},
      {97, 1, 1, 128, 2, RopeMode::kNormal, Scaling::kNone, 0, false, 128},
      {15, 3, 3, 64, 2, RopeMode::kNormal, Scaling::kNone, 0, false, 17},
      {16, 3, 3, 3, 2, RopeMode::kNormal, Scaling::kNone, 0, false, 32},  // 18-byte rows
  };
  for (const FusedCase& c : cases) {
    CheckFused<__nv_bfloat16>(GetParam(), c, kInPlaceOnly, kPositions, rng);
    CheckFused<__half>(GetParam(), c, kInPlaceOnly, kPositions, rng);
    CheckFused<float>(GetParam(), c, kInPlaceOnly, kPositions, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, RopeKvWriteKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
