// The SIMT emulator itself: CUDA semantics it must reproduce (warp shuffles and votes, barriers
// that ignore exited threads, atomics, shared memory per block) and the kernel bugs it must
// catch (missing barrier, divergent barrier, bad shuffle masks, deadlocks, out-of-bounds reads),
// so that the kernel tests built on it can never pass vacuously.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/ptx_ops.cuh"
#include "kernels/simt/emulator.h"
#include "tests/unit/cuda/device_buffer.h"
#include "tests/unit/cuda/emulator_schedules.h"

namespace tessera::simt {
namespace {

using ::testing::HasSubstr;

LaunchConfig Config(Schedule schedule, dim3 grid, dim3 block, size_t dynamic_shared = 0) {
  LaunchConfig config;
  config.grid = grid;
  config.block = block;
  config.dynamic_shared_bytes = dynamic_shared;
  config.schedule = schedule;
  return config;
}

// ---- kernels -------------------------------------------------------------------------------

// Sum of `in` per block: warp shuffles, one partial per warp in shared memory, then the first
// warp reduces under `if (threadIdx.x < 32)` and thread 0 adds to `out` atomically.
__global__ void BlockSum(const int* in, int n, int* out) {
  TESSERA_SHARED(int, partial, 32);
  int value = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    value += in[i];
  }
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = value;
  __syncthreads();
  if (threadIdx.x < 32) {
    int p = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) p += __shfl_down_sync(0xFFFFFFFFu, p, offset);
    if (threadIdx.x == 0) atomicAdd(out, p);
  }
}

// Reverses each block's slice through shared memory. `with_barrier` false is the planted bug.
__global__ void ReverseThroughShared(const float* in, float* out, bool with_barrier) {
  TESSERA_SHARED(float, tile, 128);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = in[i];
  if (with_barrier) __syncthreads();
  out[i] = tile[blockDim.x - 1 - threadIdx.x];
}

constexpr int kDivergentBarrierLine = __LINE__ + 3;  // the first of the two barriers below
__global__ void DivergentBarrier(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

// Every variant of shuffle with a sub-warp width, results written per lane.
__global__ void ShuffleVariants(int width, int* idx, int* up, int* down, int* xr) {
  const int lane = threadIdx.x;
  idx[lane] = __shfl_sync(0xFFFFFFFFu, lane * 10, 3, width);
  up[lane] = __shfl_up_sync(0xFFFFFFFFu, lane * 10, 2, width);
  down[lane] = __shfl_down_sync(0xFFFFFFFFu, lane * 10, 3, width);
  xr[lane] = __shfl_xor_sync(0xFFFFFFFFu, lane * 10, 5, width);
}

__global__ void Votes(unsigned* ballot, int* any, int* all) {
  const int lane = threadIdx.x;
  ballot[lane] = __ballot_sync(0xFFFFFFFFu, lane % 3 == 0);
  any[lane] = __any_sync(0xFFFFFFFFu, lane == 17);
  all[lane] = __all_sync(0xFFFFFFFFu, lane < 40);
}

// Two half-warps shuffle independently with disjoint masks (legal divergence).
__global__ void HalfWarpShuffles(int* out) {
  const int lane = threadIdx.x;
  if (lane < 16) {
    out[lane] = __shfl_sync(0x0000FFFFu, lane, 0);
  } else {
    out[lane] = __shfl_sync(0xFFFF0000u, lane, 31);
  }
}

// Planted: lanes 16..31 skip the shuffle, but the mask names the whole warp.
__global__ void ShuffleMaskNamesAbsentLanes(int* out) {
  const int lane = threadIdx.x;
  int value = lane;
  if (lane < 16) value = __shfl_sync(0xFFFFFFFFu, lane, 0);
  out[lane] = value;
}

// Planted: the mask does not name the calling lane.
__global__ void ShuffleMaskWithoutSelf(int* out) {
  out[threadIdx.x] = __shfl_sync(0x1u, static_cast<int>(threadIdx.x), 0);
}

// Planted: the two halves reach shuffles with overlapping but different masks.
__global__ void MismatchedMasks(int* out) {
  const int lane = threadIdx.x;
  if (lane < 8) {
    out[lane] = __shfl_sync(0x000000FFu, lane, 0);
  } else {
    out[lane] = __shfl_sync(0xFFFFFFFFu, lane, 0);
  }
}

// Planted: reads a lane that the mask does not name.
__global__ void ShuffleReadsOutsideMask(int* out) {
  const int lane = threadIdx.x;
  if (lane < 16) out[lane] = __shfl_sync(0x0000FFFFu, lane, 20);
}

// Threads 0..15 wait at a barrier that threads 16..31 never reach: they wait at __syncwarp.
__global__ void BarrierVersusSyncwarp(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncwarp();
  }
  out[threadIdx.x] = 1;
}

// Half the threads exit early; the barrier counts only the threads still running.
__global__ void BarrierAfterEarlyExit(int* out) {
  TESSERA_SHARED(int, shared, 64);
  if (threadIdx.x >= 32) return;
  shared[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = shared[31 - threadIdx.x];
}

__global__ void ReadPastEnd(const float* in, int n, float* out) {
  out[threadIdx.x] = in[n + threadIdx.x];
}

// Reads `back` elements before the buffer's start (a block id of -1 in a paged pool).
__global__ void ReadBeforeStart(const float* in, int back, float* out) {
  out[threadIdx.x] = in[static_cast<int>(threadIdx.x) - back];
}

__global__ void ReadUninitializedShared(unsigned* out) {
  TESSERA_SHARED(unsigned, fresh, 64);
  out[threadIdx.x] = fresh[threadIdx.x];
  fresh[threadIdx.x] = 7;  // must not leak into the next block
}

__global__ void DynamicSharedRoundTrip(const int* in, int* out) {
  TESSERA_DYNAMIC_SHARED(int, scratch);
  scratch[threadIdx.x] = in[threadIdx.x] * 2;
  __syncthreads();
  out[threadIdx.x] = scratch[(threadIdx.x + 1) % blockDim.x];
}

// ---- tests that must hold under every schedule -----------------------------------------------

class SimtScheduleTest : public ::testing::TestWithParam<Schedule> {};

TEST_P(SimtScheduleTest, BlockSumWithWarpReductionUnderIf) {
  for (int n : {1, 97, 1000, 4099}) {
    DeviceBuffer<int> in(n), out(1);
    for (int i = 0; i < n; ++i) in[i] = (i * 37) % 11 - 5;
    out[0] = 0;
    for (unsigned threads : {32u, 96u, 256u}) {
      out[0] = 0;
      ASSERT_TRUE(Launch(Config(GetParam(), dim3(5), dim3(threads)), BlockSum,
                         static_cast<const int*>(in.get()), n, out.get()).ok());
      int expected = 0;
      for (int i = 0; i < n; ++i) expected += in[i];
      EXPECT_EQ(out[0], expected) << "n=" << n << " threads=" << threads;
    }
  }
}

TEST_P(SimtScheduleTest, BarrierMakesSharedMemoryReverseCorrect) {
  DeviceBuffer<float> in(384), out(384);
  for (int i = 0; i < 384; ++i) in[i] = static_cast<float>(i);
  ASSERT_TRUE(Launch(Config(GetParam(), dim3(3), dim3(128)), ReverseThroughShared,
                     static_cast<const float*>(in.get()), out.get(), true).ok());
  for (int i = 0; i < 384; ++i) EXPECT_EQ(out[i], in[(i / 128) * 128 + 127 - i % 128]) << i;
}

TEST_P(SimtScheduleTest, ShuffleVariantsFollowCudaWidthRules) {
  for (int width : {32, 16, 8, 4}) {
    DeviceBuffer<int> idx(32), up(32), down(32), xr(32);
    ASSERT_TRUE(Launch(Config(GetParam(), dim3(1), dim3(32)), ShuffleVariants, width, idx.get(),
                       up.get(), down.get(), xr.get()).ok());
    for (int lane = 0; lane < 32; ++lane) {
      const int base = lane & ~(width - 1);
      EXPECT_EQ(idx[lane], (base + (3 & (width - 1))) * 10);
      EXPECT_EQ(up[lane], (lane - base < 2 ? lane : lane - 2) * 10);
      EXPECT_EQ(down[lane], (lane - base + 3 >= width ? lane : lane + 3) * 10);
      const int x = lane ^ 5;
      EXPECT_EQ(xr[lane], (x >= base + width ? lane : x) * 10) << "width " << width;
    }
  }
}

TEST_P(SimtScheduleTest, VotesSeeEveryLane) {
  DeviceBuffer<unsigned> ballot(32);
  DeviceBuffer<int> any(32), all(32);
  ASSERT_TRUE(Launch(Config(GetParam(), dim3(1), dim3(32)), Votes, ballot.get(), any.get(),
                     all.get()).ok());
  unsigned expected = 0;
  for (int lane = 0; lane < 32; lane += 3) expected |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(ballot[lane], expected);
    EXPECT_EQ(any[lane], 1);
    EXPECT_EQ(all[lane], 1);
  }
}

TEST_P(SimtScheduleTest, DisjointHalfWarpShufflesAreIndependent) {
  DeviceBuffer<int> out(32);
  ASSERT_TRUE(Launch(Config(GetParam(), dim3(1), dim3(32)), HalfWarpShuffles, out.get()).ok());
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(out[lane], lane < 16 ? 0 : 31);
}

TEST_P(SimtScheduleTest, ExitedThreadsDoNotCountAtBarriers) {
  DeviceBuffer<int> out(32);
  ASSERT_TRUE(
      Launch(Config(GetParam(), dim3(2), dim3(64)), BarrierAfterEarlyExit, out.get()).ok());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 31 - i);
}

TEST_P(SimtScheduleTest, SharedMemoryIsPoisonedForEveryBlock) {
  DeviceBuffer<unsigned> out(64);
  ASSERT_TRUE(
      Launch(Config(GetParam(), dim3(3), dim3(64)), ReadUninitializedShared, out.get()).ok());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], 0xFFFFFFFFu) << i;
}

TEST_P(SimtScheduleTest, DynamicSharedMemory) {
  DeviceBuffer<int> in(50), out(50);
  std::iota(&in[0], &in[0] + 50, 0);
  ASSERT_TRUE(Launch(Config(GetParam(), dim3(1), dim3(50), 50 * sizeof(int)),
                     DynamicSharedRoundTrip, static_cast<const int*>(in.get()), out.get()).ok());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(out[i], ((i + 1) % 50) * 2);
}

// ---- planted bugs the emulator must catch ---------------------------------------------------

// A dependent launch's kernel: every thread but those >= `skip_from` passes the grid-dependency
// wait, and thread i writes i.
__global__ void DependentWrite(int* out, int skip_from) {
  if (static_cast<int>(threadIdx.x) >= skip_from) return;
  tessera::cuda::ptx::GridDependencyWait();
  out[threadIdx.x] = threadIdx.x;
}

TEST_P(SimtScheduleTest, DependentLaunchWhoseThreadsAllWaitRuns) {
  DeviceBuffer<int> out(64);
  LaunchConfig config = Config(GetParam(), dim3(1), dim3(64));
  config.dependent = true;
  ASSERT_TRUE(Launch(config, DependentWrite, out.get(), 64).ok());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], i);
}

TEST_P(SimtScheduleTest, DependentLaunchWithAThreadThatSkipsTheWaitIsAnError) {
  DeviceBuffer<int> out(64);
  LaunchConfig config = Config(GetParam(), dim3(2), dim3(64));
  ASSERT_TRUE(Launch(config, DependentWrite, out.get(), 63).ok());  // not dependent: no promise
  config.dependent = true;
  const absl::Status status = Launch(config, DependentWrite, out.get(), 63);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("without ptx::GridDependencyWait"));
}

TEST_P(SimtScheduleTest, DivergentBarrierIsAnErrorNamingBothLines) {
  DeviceBuffer<int> out(32);
  const absl::Status status =
      Launch(Config(GetParam(), dim3(1), dim3(32)), DivergentBarrier, out.get());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("divergent __syncthreads"));
  for (int line : {kDivergentBarrierLine, kDivergentBarrierLine + 2}) {
    EXPECT_THAT(status.message(), HasSubstr("simt_emulator_test.cc:" + std::to_string(line)));
  }
}

TEST_P(SimtScheduleTest, ShuffleMaskNamingLanesThatNeverArriveIsReported) {
  DeviceBuffer<int> out(32);
  const absl::Status status =
      Launch(Config(GetParam(), dim3(1), dim3(32)), ShuffleMaskNamesAbsentLanes, out.get());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("__shfl_sync"));
  EXPECT_THAT(status.message(), HasSubstr("exited"));
}

TEST_P(SimtScheduleTest, ShuffleMaskWithoutCallingLaneIsAnError) {
  DeviceBuffer<int> out(32);
  const absl::Status status =
      Launch(Config(GetParam(), dim3(1), dim3(32)), ShuffleMaskWithoutSelf, out.get());
  EXPECT_THAT(status.message(), HasSubstr("does not name itself"));
}

TEST_P(SimtScheduleTest, MismatchedMasksAreAnError) {
  DeviceBuffer<int> out(32);
  const absl::Status status =
      Launch(Config(GetParam(), dim3(1), dim3(32)), MismatchedMasks, out.get());
  // Which lane notices first depends on the schedule: a lane meeting the other mask, or a lane
  // of the full mask leaving while the others wait for it. Both name the full mask.
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("mask 0xffffffff"));
}

TEST_P(SimtScheduleTest, ShuffleReadingOutsideItsMaskIsAnError) {
  DeviceBuffer<int> out(32);
  const absl::Status status =
      Launch(Config(GetParam(), dim3(1), dim3(32)), ShuffleReadsOutsideMask, out.get());
  EXPECT_THAT(status.message(), HasSubstr("reads lane 20"));
}

TEST_P(SimtScheduleTest, DeadlockIsReportedNotHung) {
  DeviceBuffer<int> out(32);
  const absl::Status status =
      Launch(Config(GetParam(), dim3(1), dim3(32)), BarrierVersusSyncwarp, out.get());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("deadlock"));
  EXPECT_THAT(status.message(), HasSubstr("__syncwarp"));
}

INSTANTIATE_TEST_SUITE_P(Schedules, SimtScheduleTest, ::testing::ValuesIn(TestSchedules()),
                         [](const auto& info) { return ScheduleTestName(info.param); });

// ---- across schedules ----------------------------------------------------------------------

// Without the barrier, in-order execution happens to give the right answer (each thread writes
// before any later thread reads); the reverse and random schedules expose the race.
TEST(SimtPlantedBugs, MissingBarrierGivesWrongResultsUnderSomeSchedule) {
  DeviceBuffer<float> in(256), out(256);
  for (int i = 0; i < 256; ++i) in[i] = static_cast<float>(i);
  int schedules_that_caught_it = 0;
  for (const Schedule& schedule : TestSchedules()) {
    ASSERT_TRUE(Launch(Config(schedule, dim3(2), dim3(128)), ReverseThroughShared,
                       static_cast<const float*>(in.get()), out.get(), false).ok());
    int wrong = 0;
    for (int i = 0; i < 256; ++i) wrong += out[i] != in[(i / 128) * 128 + 127 - i % 128];
    schedules_that_caught_it += wrong > 0;
  }
  EXPECT_GE(schedules_that_caught_it, 2);
  ASSERT_TRUE(Launch(Config(Schedule::Reverse(), dim3(2), dim3(128)), ReverseThroughShared,
                     static_cast<const float*>(in.get()), out.get(), false).ok());
  int wrong = 0;
  for (int i = 0; i < 256; ++i) wrong += out[i] != in[(i / 128) * 128 + 127 - i % 128];
  EXPECT_GT(wrong, 0) << "the reverse schedule must expose a missing barrier";
}

TEST(SimtPlantedBugsDeathTest, OutOfBoundsReadFaultsAndNamesTheBuffer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto read_past_end = [] {
    DeviceBuffer<float> in(17), out(32);
    (void)Launch(Config(Schedule::InOrder(), dim3(1), dim3(32)), ReadPastEnd,
                 static_cast<const float*>(in.get()), 17, out.get());
  };
  EXPECT_DEATH(read_past_end(), "bytes past the end of a 68-byte device buffer");
}

// A negative index past the first page's slack lands in the leading guard (up to 64 KiB): a
// paged KV pool's block -1 faults instead of reading another layer's pool.
TEST(SimtPlantedBugsDeathTest, ReadBeforeTheStartFaultsAndNamesTheBuffer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto read_before_start = [] {
    DeviceBuffer<float> in(8192), out(32);  // 32 KiB: the data starts on a page boundary
    (void)Launch(Config(Schedule::InOrder(), dim3(1), dim3(32)), ReadBeforeStart,
                 static_cast<const float*>(in.get()), 1024, out.get());
  };
  EXPECT_DEATH(read_before_start(), "bytes before the start of a 32768-byte device buffer");
}

TEST(SimtLaunch, RejectsInvalidConfigurations) {
  DeviceBuffer<int> out(32);
  EXPECT_EQ(Launch(Config(Schedule::InOrder(), dim3(1), dim3(1025)), HalfWarpShuffles, out.get())
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Launch(Config(Schedule::InOrder(), dim3(0), dim3(32)), HalfWarpShuffles, out.get())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SimtSchedule, ParsesAndPrints) {
  EXPECT_EQ(Schedule::Parse("random:42")->seed, 42u);
  EXPECT_EQ(Schedule::Parse("reverse")->kind, ScheduleKind::kReverse);
  EXPECT_EQ(Schedule::Parse("in-order")->ToString(), "in-order");
  EXPECT_FALSE(Schedule::Parse("sideways").ok());
  EXPECT_FALSE(Schedule::Parse("random:x").ok());
}

}  // namespace
}  // namespace tessera::simt
