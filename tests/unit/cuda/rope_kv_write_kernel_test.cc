// The fused RoPE + KV write kernel on the emulator against the two kernels it fuses (LaunchRope,
// then LaunchKvWrite) on the same inputs: q, k and both pools bit for bit, with q, k, v given
// separately (rotated in place) and as rows of one [q | k | v] projection output (q copied out),
// with and without q/k/v biases (against LaunchAddBias on each first). Normal and NeoX
// pairing, full and partial rotary dims, a position outside the table (no rotation, still
// written), padding rows (slot -1: rotated, not written), shuffled slots; bf16 / f16 / f32; head
// dims 32, 64 and 128, GQA 1 and 4, and a 3 x 6 row (not whole 16-byte vectors: the scalar copy);
// under every test schedule. The two kernels are tested against their references on their own
// (rope_kernel_test, kv_write_kernel_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/rope_kv_write.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

constexpr int kMaxPositions = 64;

struct FusedCase {
  int num_tokens, num_heads, num_kv_heads, head_dim, rope_dim;
  RopeStyle style;
  int pad;  // extra elements per [q | k | v] row (16-byte vectors need 8 halves / 4 floats)
  bool biases = false;  // q/k/v biases (added first; separately: LaunchAddBias x 3)
};

template <typename T>
std::vector<uint32_t> BitsOf(const std::vector<T>& values) {
  std::vector<uint32_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) std::memcpy(&bits[i], &values[i], sizeof(T));
  return bits;
}

template <typename T>
void CheckFused(const simt::Schedule& schedule, const FusedCase& c, std::mt19937& rng) {
  const size_t q_row = size_t(c.num_heads) * c.head_dim, kv_row = size_t(c.num_kv_heads) * c.head_dim;
  const int num_slots = 2 * c.num_tokens + 3;
  std::vector<int32_t> slots(num_slots), positions(c.num_tokens);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(c.num_tokens);
  std::uniform_int_distribution<int32_t> position(0, kMaxPositions - 1);
  for (int t = 0; t < c.num_tokens; ++t) {
    positions[t] = t % 5 == 3 ? kMaxPositions + 2 : position(rng);  // outside: not rotated
    if (t % 3 == 1) slots[t] = -1;  // padding: nothing written
  }
  const std::vector<float> cos_sin = simt::RandomFloats(size_t(kMaxPositions) * c.rope_dim, rng);
  const std::vector<T> q = simt::Convert<T>(simt::RandomFloats(c.num_tokens * q_row, rng));
  const std::vector<T> k = simt::Convert<T>(simt::RandomFloats(c.num_tokens * kv_row, rng));
  const std::vector<T> v = simt::Convert<T>(simt::RandomFloats(c.num_tokens * kv_row, rng));
  const std::vector<T> pool = simt::Convert<T>(simt::RandomFloats(num_slots * kv_row, rng, 2, 3));
  DeviceBuffer<int32_t> d_positions{std::span<const int32_t>(positions)},
      d_slots{std::span<const int32_t>(slots)};
  DeviceBuffer<float> d_cos_sin{std::span<const float>(cos_sin)};
  const std::vector<T> bq = simt::Convert<T>(simt::RandomFloats(q_row, rng)),
                       bk = simt::Convert<T>(simt::RandomFloats(kv_row, rng)),
                       bv = simt::Convert<T>(simt::RandomFloats(kv_row, rng));
  DeviceBuffer<T> d_bq{std::span<const T>(bq)}, d_bk{std::span<const T>(bk)},
      d_bv{std::span<const T>(bv)};
  simt::TestLauncher launcher(schedule);
  struct Run {
    std::vector<T> q, k, k_pool, v_pool;
  };
  // kFused: the fused kernel on separate q, k, v; kRows: on rows of [q | k | v | pad] (a QKV
  // projection's output), q copied out.
  enum class Way { kSeparate, kFused, kRows };
  const auto run = [&](Way way) {
    DeviceBuffer<T> d_q{std::span<const T>(q)}, d_k{std::span<const T>(k)},
        d_v{std::span<const T>(v)}, d_k_pool{std::span<const T>(pool)},
        d_v_pool{std::span<const T>(pool)};
    const int64_t stride = int64_t(q_row + 2 * kv_row) + c.pad;
    std::vector<T> fused_rows(c.num_tokens * stride, simt::FloatTo<T>(9.0f));
    for (int t = 0; t < c.num_tokens; ++t) {
      std::copy_n(q.begin() + t * q_row, q_row, fused_rows.begin() + t * stride);
      std::copy_n(k.begin() + t * kv_row, kv_row, fused_rows.begin() + t * stride + q_row);
      std::copy_n(v.begin() + t * kv_row, kv_row, fused_rows.begin() + t * stride + q_row + kv_row);
    }
    DeviceBuffer<T> d_rows{std::span<const T>(fused_rows)};
    if (way == Way::kSeparate) {
      if (c.biases) {
        EXPECT_TRUE(LaunchAddBias(launcher, d_q.get(), static_cast<const T*>(d_bq.get()),
                                  c.num_tokens, int(q_row)).ok());
        EXPECT_TRUE(LaunchAddBias(launcher, d_k.get(), static_cast<const T*>(d_bk.get()),
                                  c.num_tokens, int(kv_row)).ok());
        EXPECT_TRUE(LaunchAddBias(launcher, d_v.get(), static_cast<const T*>(d_bv.get()),
                                  c.num_tokens, int(kv_row)).ok());
      }
      EXPECT_TRUE(LaunchRope(launcher, c.style, d_q.get(), d_k.get(), d_positions.get(),
                             d_cos_sin.get(), kMaxPositions, c.num_tokens, c.num_heads,
                             c.num_kv_heads, c.head_dim, c.rope_dim)
                      .ok());
      EXPECT_TRUE(LaunchKvWrite(launcher, static_cast<const T*>(d_k.get()),
                                static_cast<const T*>(d_v.get()), d_k_pool.get(), d_v_pool.get(),
                                static_cast<const int32_t*>(d_slots.get()), c.num_tokens,
                                c.num_kv_heads, c.head_dim)
                      .ok());
      return Run{d_q.ToHost(), d_k.ToHost(), d_k_pool.ToHost(), d_v_pool.ToHost()};
    }
    RopeKvWriteRows<T> rows =
        way == Way::kFused
            ? RopeKvWriteRows<T>{d_q.get(), d_q.get(), d_k.get(), d_v.get(), int64_t(q_row),
                                 int64_t(kv_row)}
            : RopeKvWriteRows<T>{d_rows.get(), d_q.get(), d_rows.get() + q_row,
                                 d_rows.get() + q_row + kv_row, stride, stride};
    if (c.biases) {
      rows.q_bias = d_bq.get();
      rows.k_bias = d_bk.get();
      rows.v_bias = d_bv.get();
    }
    EXPECT_TRUE(LaunchRopeKvWrite(launcher, c.style, rows, d_k_pool.get(), d_v_pool.get(),
                                  static_cast<const int32_t*>(d_positions.get()),
                                  static_cast<const int32_t*>(d_slots.get()),
                                  static_cast<const float*>(d_cos_sin.get()), kMaxPositions,
                                  c.num_tokens, c.num_heads, c.num_kv_heads, c.head_dim,
                                  c.rope_dim)
                    .ok());
    std::vector<T> k_out = d_k.ToHost();
    if (way == Way::kRows) {  // the rotated k lives in the fused rows
      const std::vector<T> rows_out = d_rows.ToHost();
      for (int t = 0; t < c.num_tokens; ++t) {
        std::copy_n(rows_out.begin() + t * stride + q_row, kv_row, k_out.begin() + t * kv_row);
      }
    }
    return Run{d_q.ToHost(), k_out, d_k_pool.ToHost(), d_v_pool.ToHost()};
  };
  const Run separate = run(Way::kSeparate);
  for (const Way way : {Way::kFused, Way::kRows}) {
    const Run fused = run(way);
    const char* what = way == Way::kFused ? "in place" : "from [q | k | v] rows";
    EXPECT_EQ(BitsOf(fused.q), BitsOf(separate.q)) << what;
    EXPECT_EQ(BitsOf(fused.k), BitsOf(separate.k)) << what;
    EXPECT_EQ(BitsOf(fused.k_pool), BitsOf(separate.k_pool)) << what;
    EXPECT_EQ(BitsOf(fused.v_pool), BitsOf(separate.v_pool)) << what;
    EXPECT_NE(BitsOf(fused.k_pool), BitsOf(pool)) << what << ": nothing was written";
    EXPECT_NE(BitsOf(fused.q), BitsOf(q)) << what << ": nothing was rotated";
  }
}

class RopeKvWriteKernelTest : public simt::KernelTest {};

TEST_P(RopeKvWriteKernelTest, EqualsRopeThenKvWrite) {
  std::mt19937 rng(77);
  CheckFused<__nv_bfloat16>(GetParam(), {17, 8, 2, 128, 128, RopeStyle::kNormal, 0}, rng);
  CheckFused<__half>(GetParam(), {5, 4, 4, 64, 32, RopeStyle::kNeox, 8}, rng);
  CheckFused<float>(GetParam(), {9, 2, 1, 32, 32, RopeStyle::kNeox, 3}, rng);  // scalar copy
  CheckFused<__nv_bfloat16>(GetParam(), {4, 3, 3, 6, 4, RopeStyle::kNormal, 0}, rng);  // scalar
  CheckFused<float>(GetParam(), {1, 4, 1, 64, 64, RopeStyle::kNormal, 4}, rng);
  // With q/k/v biases (Qwen2): the same bits as three bias adds first.
  CheckFused<__nv_bfloat16>(GetParam(), {6, 4, 2, 64, 64, RopeStyle::kNeox, 0, true}, rng);
  CheckFused<__half>(GetParam(), {3, 2, 1, 32, 16, RopeStyle::kNormal, 8, true}, rng);
  CheckFused<float>(GetParam(), {4, 3, 3, 6, 4, RopeStyle::kNormal, 1, true}, rng);  // scalar
}

INSTANTIATE_TEST_SUITE_P(Schedules, RopeKvWriteKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
