// KV write CUDA kernel on the emulator: rows land bit for bit in the slots the mapping names
// (shuffled, non-monotonic slots across blocks), padding rows (slot -1) write nothing, and every
// other slot of both pools keeps its previous bits. bf16, f16 and f32 pools, block sizes 1 and 16,
// head dims 64 and 128, and a row of 3 x 3 elements (not a multiple of 16 bytes: the scalar
// path). Exact comparison: the kernel copies bits, no arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>

#include "kernels/cuda/kv_write.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

template <typename T>
uint32_t Bits(T value) {
  static_assert(sizeof(T) <= sizeof(uint32_t));
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

struct KvWriteCase {
  int num_tokens;
  int num_blocks;
  int block_size;
  int num_kv_heads;
  int head_dim;
};

template <typename T>
void CheckKvWrite(const simt::Schedule& schedule, const KvWriteCase& c, std::mt19937& rng) {
  const size_t row = size_t(c.num_kv_heads) * c.head_dim;
  const int num_slots = c.num_blocks * c.block_size;
  ASSERT_LE(c.num_tokens, num_slots);
  // Distinct slots in shuffled order; every third token a padding row.
  std::vector<int32_t> slots(num_slots);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(c.num_tokens);
  for (int t = 1; t < c.num_tokens; t += 3) slots[t] = -1;

  const std::vector<T> k = simt::Convert<T>(simt::RandomFloats(c.num_tokens * row, rng));
  const std::vector<T> v = simt::Convert<T>(simt::RandomFloats(c.num_tokens * row, rng));
  const std::vector<T> k_before = simt::Convert<T>(simt::RandomFloats(num_slots * row, rng, 2, 3));
  const std::vector<T> v_before = simt::Convert<T>(simt::RandomFloats(num_slots * row, rng, 2, 3));
  DeviceBuffer<T> d_k{std::span<const T>(k)}, d_v{std::span<const T>(v)};
  DeviceBuffer<T> d_k_pool{std::span<const T>(k_before)}, d_v_pool{std::span<const T>(v_before)};
  DeviceBuffer<int32_t> d_slots{std::span<const int32_t>(slots)};
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(LaunchKvWrite(launcher, static_cast<const T*>(d_k.get()),
                            static_cast<const T*>(d_v.get()), d_k_pool.get(), d_v_pool.get(),
                            static_cast<const int32_t*>(d_slots.get()), c.num_tokens,
                            c.num_kv_heads, c.head_dim)
                  .ok());

  std::vector<int> source_of_slot(num_slots, -1);
  for (int t = 0; t < c.num_tokens; ++t) {
    if (slots[t] >= 0) source_of_slot[slots[t]] = t;
  }
  for (int s = 0; s < num_slots; ++s) {
    const int t = source_of_slot[s];
    for (size_t i = 0; i < row; ++i) {
      const size_t at = s * row + i;
      const uint32_t want_k = Bits(t >= 0 ? k[t * row + i] : k_before[at]);
      const uint32_t want_v = Bits(t >= 0 ? v[t * row + i] : v_before[at]);
      ASSERT_EQ(Bits(d_k_pool[at]), want_k) << "slot " << s << " element " << i << " token " << t;
      ASSERT_EQ(Bits(d_v_pool[at]), want_v) << "slot " << s << " element " << i << " token " << t;
    }
  }
}

class KvWriteKernelTest : public simt::KernelTest {};

TEST_P(KvWriteKernelTest, WritesMappedSlotsOnly) {
  std::mt19937 rng(77);
  const KvWriteCase cases[] = {
      {1, 1, 1, 1, 64},   {3, 4, 1, 2, 128},  {17, 3, 16, 2, 64},
      {97, 8, 16, 1, 128}, {15, 17, 1, 3, 64}, {16, 2, 16, 3, 3},  // 18-byte rows: scalar path
  };
  for (const KvWriteCase& c : cases) {
    CheckKvWrite<__nv_bfloat16>(GetParam(), c, rng);
    CheckKvWrite<__half>(GetParam(), c, rng);
    CheckKvWrite<float>(GetParam(), c, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, KvWriteKernelTest, ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
