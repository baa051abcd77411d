// The CUDA-graph cache (worker/cuda/graph_cache.h) on the emulated device: the bucket list of
// DESIGN.md §5, capture on first use then replay, padding to the bucket, replay reading the
// persistent inputs as they are at replay time (replay == eager), eager capture at start-up,
// and every miss reason counted.
#include "worker/cuda/graph_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/device_compat.cuh"
#include "kernels/device/emulated_device_runtime.h"

namespace tessera::worker {
namespace {

using ::testing::ElementsAre;

// out[i] = base[0] + i for the first `rows` rows: a stand-in for a decode step that reads the
// runner's persistent input buffer.
__global__ void StepKernel(const int* base, int* out, int rows) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows) out[i] = base[0] + i;
}

class GraphCacheTest : public ::testing::Test {
 protected:
  GraphCacheTest() : runtime_(16 << 20, simt::Schedule::Random(5)) {
    base_ = static_cast<int*>(*runtime_.Allocate(sizeof(int)));
    out_ = static_cast<int*>(*runtime_.Allocate(300 * sizeof(int)));
  }

  // What a runner does per step: copy this step's inputs, then launch for `rows` rows.
  absl::Status Enqueue(int rows) {
    ++enqueued_;
    if (absl::Status s = runtime_.CopyToDevice(base_, &host_base_, sizeof(int)); !s.ok()) return s;
    return runtime_.launcher().Launch(
        cuda::LaunchShape{dim3(cuda::CeilDiv(rows, 64)), dim3(64)}, StepKernel,
        static_cast<const int*>(base_), out_, rows);
  }

  void Clear() { std::fill(out_, out_ + 300, -1); }
  int RowsWritten() const {
    int n = 0;
    while (n < 300 && out_[n] != -1) ++n;
    return n;
  }

  device::EmulatedDeviceRuntime runtime_;
  int* base_;
  int* out_;
  int host_base_ = 100;
  int enqueued_ = 0;
};

TEST(GraphBatchBuckets, FollowTheDesignedSteps) {
  EXPECT_THAT(GraphBatchBuckets(1), ElementsAre(1));
  EXPECT_THAT(GraphBatchBuckets(20), ElementsAre(1, 2, 4, 8, 16, 20));
  const std::vector<int> big = GraphBatchBuckets(300);
  EXPECT_EQ(big[4], 16);
  EXPECT_EQ(big[5], 24);
  EXPECT_EQ(*std::find(big.begin(), big.end(), 256), 256);
  EXPECT_EQ(big[big.size() - 3], 272);
  EXPECT_EQ(big[big.size() - 2], 288);
  EXPECT_EQ(big.back(), 300);
}

TEST(CudaGraphMode, ParsesTheFlagValues) {
  EXPECT_EQ(*ParseCudaGraphMode("lazy"), CudaGraphMode::kLazy);
  EXPECT_EQ(*ParseCudaGraphMode("eager"), CudaGraphMode::kEager);
  EXPECT_EQ(*ParseCudaGraphMode("off"), CudaGraphMode::kOff);
  EXPECT_FALSE(ParseCudaGraphMode("always").ok());
}

TEST_F(GraphCacheTest, LazyCapturesOnceThenReplaysPaddedToTheBucket) {
  GraphCache cache(&runtime_, CudaGraphMode::kLazy, 64);
  auto enqueue = [this](int rows) { return Enqueue(rows); };
  Clear();
  absl::StatusOr<GraphStepOutcome> first = cache.RunDecode(3, enqueue);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->replayed && first->captured);
  EXPECT_EQ(enqueued_, 2) << "one eager warm-up run, then the capture";
  EXPECT_EQ(first->rows, 4);
  EXPECT_EQ(RowsWritten(), 4) << "the step ran padded to its bucket";
  EXPECT_EQ(out_[3], 103);

  // A later step of the same bucket replays without enqueueing anything new, and reads the
  // input buffer as it is now.
  host_base_ = 500;
  Clear();
  const int enqueued_before = enqueued_;
  absl::StatusOr<GraphStepOutcome> second = cache.RunDecode(4, enqueue);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->replayed);
  EXPECT_FALSE(second->captured);
  EXPECT_EQ(enqueued_, enqueued_before);
  EXPECT_EQ(out_[0], 500);
  EXPECT_EQ(RowsWritten(), 4);
  EXPECT_EQ(cache.captures(), 1);
  EXPECT_EQ(cache.replays(), 2);
}

TEST_F(GraphCacheTest, ReplayEqualsEagerForEveryBucket) {
  GraphCache cache(&runtime_, CudaGraphMode::kLazy, 40);
  auto enqueue = [this](int rows) { return Enqueue(rows); };
  for (int rows = 1; rows <= 40; ++rows) {
    host_base_ = 7 * rows;
    Clear();
    ASSERT_TRUE(cache.RunDecode(rows, enqueue).ok());
    const std::vector<int> replayed(out_, out_ + 300);
    Clear();
    ASSERT_TRUE(Enqueue(*cache.BucketFor(rows)).ok());
    EXPECT_EQ(std::vector<int>(out_, out_ + 300), replayed) << "rows " << rows;
  }
  EXPECT_EQ(cache.captures(), static_cast<int64_t>(cache.buckets().size()));
}

TEST_F(GraphCacheTest, EagerModeCapturesEveryBucketAtStartUp) {
  GraphCache cache(&runtime_, CudaGraphMode::kEager, 24);
  auto enqueue = [this](int rows) { return Enqueue(rows); };
  ASSERT_TRUE(cache.CaptureAll(enqueue).ok());
  EXPECT_EQ(cache.captures(), 6);  // 1 2 4 8 16 24
  for (int rows : {1, 5, 17, 24}) {
    absl::StatusOr<GraphStepOutcome> outcome = cache.RunDecode(rows, enqueue);
    ASSERT_TRUE(outcome.ok());
    EXPECT_TRUE(outcome->replayed);
    EXPECT_FALSE(outcome->captured);
  }
  EXPECT_EQ(cache.captures(), 6);
}

TEST_F(GraphCacheTest, MissesAreCountedByReason) {
  auto enqueue = [this](int rows) { return Enqueue(rows); };
  GraphCache off(&runtime_, CudaGraphMode::kOff, 8);
  Clear();
  absl::StatusOr<GraphStepOutcome> disabled = off.RunDecode(3, enqueue);
  ASSERT_TRUE(disabled.ok());
  EXPECT_EQ(disabled->miss, GraphMissReason::kDisabled);
  EXPECT_EQ(RowsWritten(), 3) << "an eager step is not padded";
  EXPECT_EQ(off.misses(GraphMissReason::kDisabled), 1);

  GraphCache lazy(&runtime_, CudaGraphMode::kLazy, 8);
  absl::StatusOr<GraphStepOutcome> oversize = lazy.RunDecode(9, enqueue);
  ASSERT_TRUE(oversize.ok());
  EXPECT_EQ(oversize->miss, GraphMissReason::kOversize);
  EXPECT_EQ(lazy.misses(GraphMissReason::kOversize), 1);

  GraphCache eager(&runtime_, CudaGraphMode::kEager, 8);  // CaptureAll never called
  absl::StatusOr<GraphStepOutcome> not_captured = eager.RunDecode(2, enqueue);
  ASSERT_TRUE(not_captured.ok());
  EXPECT_EQ(not_captured->miss, GraphMissReason::kEager);

  absl::StatusOr<GraphStepOutcome> prefill = lazy.RunEager(5, enqueue);
  ASSERT_TRUE(prefill.ok());
  EXPECT_FALSE(prefill->miss.has_value());
  EXPECT_FALSE(prefill->replayed);
}

TEST_F(GraphCacheTest, AFailedCaptureLeavesNoGraphAndNoCaptureInProgress) {
  GraphCache cache(&runtime_, CudaGraphMode::kLazy, 8);
  auto failing = [](int) { return absl::InternalError("kernel failed"); };
  EXPECT_EQ(cache.RunDecode(2, failing).status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(runtime_.capturing());
  EXPECT_EQ(cache.captures(), 0);
  auto enqueue = [this](int rows) { return Enqueue(rows); };
  absl::StatusOr<GraphStepOutcome> retry = cache.RunDecode(2, enqueue);
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->captured);
}

}  // namespace
}  // namespace tessera::worker
