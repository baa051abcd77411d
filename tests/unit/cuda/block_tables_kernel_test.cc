// Block-table deltas (block_tables.cuh) on the emulator vs a CPU reference: only the first
// *count deltas are written (entries past the count hold garbage that must be ignored), indices
// outside the tables are skipped, counts beyond one grid's worth of threads stride; then the
// step's rows gathered with GatherRows<int32_t> (elementwise.cuh) equal the reference tables'
// rows. Under every test schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/block_tables.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

void CheckScatterThenGather(const simt::Schedule& schedule, int slots, int stride, int count,
                            std::mt19937& rng) {
  const int entries = slots * stride;
  std::vector<int32_t> reference(entries);
  for (int32_t& v : reference) v = static_cast<int32_t>(rng() % 1000);
  DeviceBuffer<int32_t> tables(entries);
  std::copy(reference.begin(), reference.end(), tables.get());
  // `count` distinct in-range indices, then garbage (out of range and in range) past the count.
  std::vector<int32_t> order(entries);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const int capacity = count + 4;
  DeviceBuffer<TableDelta> deltas(capacity);
  for (int i = 0; i < count; ++i) {
    deltas[i] = {order[i], 5000 + i};
    reference[order[i]] = 5000 + i;
  }
  for (int i = count; i < capacity; ++i) deltas[i] = {i % 2 ? entries + i : i % entries, -7};
  DeviceBuffer<int32_t> device_count(1);
  device_count[0] = count;
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(LaunchScatterTableDeltas(launcher, deltas.get(), device_count.get(), tables.get(),
                                       entries).ok());
  for (int i = 0; i < entries; ++i) {
    ASSERT_EQ(tables[i], reference[i]) << "entry " << i << " count " << count;
  }
  // The step's rows: slots in a shuffled order, one repeated.
  std::vector<int32_t> rows(slots);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.back() = rows.front();
  DeviceBuffer<int32_t> row_slots(slots), gathered(entries);
  std::copy(rows.begin(), rows.end(), row_slots.get());
  ASSERT_TRUE(LaunchGatherRows(launcher, static_cast<const int32_t*>(tables.get()),
                               static_cast<const int32_t*>(row_slots.get()), gathered.get(), slots,
                               stride).ok());
  for (int r = 0; r < slots; ++r) {
    for (int c = 0; c < stride; ++c) {
      ASSERT_EQ(gathered[r * stride + c], reference[rows[r] * stride + c]) << r << "," << c;
    }
  }
}

class BlockTablesKernelTest : public simt::KernelTest {};

TEST_P(BlockTablesKernelTest, ScatterWritesTheCountedDeltasAndGatherCopiesRows) {
  std::mt19937 rng(81);
  for (auto [slots, stride, count] : {std::tuple{1, 1, 0}, {1, 1, 1}, {3, 5, 2}, {5, 17, 40},
                                      {4, 64, 256}, {2, 7, 14}}) {
    CheckScatterThenGather(GetParam(), slots, stride, count, rng);
  }
}

// More deltas than one pass of the fixed grid (kTableDeltaBlocks x kTableDeltaThreads).
TEST_P(BlockTablesKernelTest, LargeCountsStride) {
  std::mt19937 rng(82);
  CheckScatterThenGather(GetParam(), 9, 512, kTableDeltaBlocks * kTableDeltaThreads + 37, rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, BlockTablesKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
