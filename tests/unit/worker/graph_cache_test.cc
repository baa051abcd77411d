// The CUDA-graph cache (worker/cuda/graph_cache.h) on a device: the bucket list of DESIGN.md §5,
// capture on first use then replay, padding to the bucket, replay reading the persistent inputs
// as they are at replay time (replay == eager), eager capture at start-up, and every miss reason
// counted. Built with TESSERA_TEST_CUDA_DEVICE=0 it runs on the emulated device (label
// cuda-emulated); with 1, compiled by nvcc, on a real GPU (gpu_graph_cache_test, label gpu),
// skipping only where no GPU is there and none is expected (tests/testing/gpu_expectation.h).
#include "worker/cuda/graph_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/device/device_memory.h"
#include "tests/testing/gpu_expectation.h"
#if TESSERA_TEST_CUDA_DEVICE
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/device/cuda_device_runtime.h"
#else
#include "kernels/device/emulated_device_runtime.h"
#endif

namespace tessera::worker {
namespace {

using ::testing::ElementsAre;

#if TESSERA_TEST_CUDA_DEVICE
using TestRuntime = device::CudaDeviceRuntime;
#else
using TestRuntime = device::EmulatedDeviceRuntime;
#endif

constexpr int kOutRows = 300;

// out[i] = base[0] + i for the first `rows` rows: a stand-in for a decode step that reads the
// runner's persistent input buffer.
__global__ void StepKernel(const int* base, int* out, int rows) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows) out[i] = base[0] + i;
}

class GraphCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenRuntime());
    if (IsSkipped()) return;
    base_ = static_cast<int*>(*runtime_->Allocate(sizeof(int)));
    out_ = static_cast<int*>(*runtime_->Allocate(kOutRows * sizeof(int)));
  }
  void TearDown() override {
    if (runtime_ == nullptr) return;
    runtime_->Free(base_);
    runtime_->Free(out_);
  }

  // What a runner does per step: copy this step's inputs, then launch for `rows` rows.
  absl::Status Enqueue(int rows) {
    ++enqueued_;
    if (absl::Status s = runtime_->CopyToDevice(base_, host_base_, sizeof(int)); !s.ok()) return s;
    const cuda::LaunchShape shape{dim3(cuda::CeilDiv(rows, 64)), dim3(64)};
#if TESSERA_TEST_CUDA_DEVICE
    const cuda::CudaLaunchResult launched =
        cuda::CudaLauncher(runtime_->stream())
            .Launch(shape, StepKernel, static_cast<const int*>(base_), out_, rows);
    if (!launched.ok()) return absl::InternalError(cuda::DescribeLaunch(launched));
    return absl::OkStatus();
#else
    return runtime_->launcher().Launch(shape, StepKernel, static_cast<const int*>(base_), out_,
                                       rows);
#endif
  }

  // Every output row -1 (all bytes 0xff), ordered on the stream.
  void Clear() { ASSERT_TRUE(runtime_->Fill(out_, 0xff, kOutRows * sizeof(int)).ok()); }
  // The output rows once everything enqueued has run.
  std::vector<int> Out() {
    std::vector<int> out(kOutRows);
    EXPECT_TRUE(runtime_->CopyToHost(out.data(), out_, kOutRows * sizeof(int)).ok());
    EXPECT_TRUE(runtime_->Synchronize().ok());
    return out;
  }
  int RowsWritten() {
    const std::vector<int> out = Out();
    int n = 0;
    while (n < kOutRows && out[n] != -1) ++n;
    return n;
  }

  std::unique_ptr<TestRuntime> runtime_;
  int* base_ = nullptr;
  int* out_ = nullptr;
  // The step's host input, the runtime's host memory (pinned on the GPU: a captured copy reads
  // host memory at replay time, which CUDA supports for page-locked memory, as the runner's).
  device::HostMemory host_memory_;
  int* host_base_ = nullptr;
  int enqueued_ = 0;

 private:
  void OpenRuntime() {
#if TESSERA_TEST_CUDA_DEVICE
    absl::StatusOr<std::unique_ptr<device::CudaDeviceRuntime>> runtime =
        device::CudaDeviceRuntime::Open(0);
    if (runtime.status().code() == absl::StatusCode::kUnavailable) {
      testing_util::SkipOrFailWithoutGpu(std::string(runtime.status().message()));
      return;
    }
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = std::move(*runtime);
#else
    runtime_ = std::make_unique<device::EmulatedDeviceRuntime>(16 << 20, simt::Schedule::Random(5));
#endif
    absl::StatusOr<device::HostMemory> host = device::HostMemory::Allocate(*runtime_, sizeof(int));
    ASSERT_TRUE(host.ok()) << host.status();
    host_memory_ = *std::move(host);
    host_base_ = host_memory_.as<int>();
    *host_base_ = 100;
  }
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
  GraphCache cache(runtime_.get(), CudaGraphMode::kLazy, 64);
  auto enqueue = [this](int rows) { return Enqueue(rows); };
  Clear();
  absl::StatusOr<GraphStepOutcome> first = cache.RunDecode(3, enqueue);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->replayed && first->captured);
  EXPECT_EQ(enqueued_, 2) << "one eager warm-up run, then the capture";
  EXPECT_EQ(first->rows, 4);
  EXPECT_EQ(RowsWritten(), 4) << "the step ran padded to its bucket";
  EXPECT_EQ(Out()[3], 103);

  // A later step of the same bucket replays without enqueueing anything new, and reads the
  // input buffer as it is now.
  *host_base_ = 500;
  Clear();
  const int enqueued_before = enqueued_;
  absl::StatusOr<GraphStepOutcome> second = cache.RunDecode(4, enqueue);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->replayed);
  EXPECT_FALSE(second->captured);
  EXPECT_EQ(enqueued_, enqueued_before);
  EXPECT_EQ(Out()[0], 500);
  EXPECT_EQ(RowsWritten(), 4);
  EXPECT_EQ(cache.captures(), 1);
  EXPECT_EQ(cache.replays(), 2);
}

TEST_F(GraphCacheTest, ReplayEqualsEagerForEveryBucket) {
  GraphCache cache(runtime_.get(), CudaGraphMode::kLazy, 40);
  auto enqueue = [this](int rows) { return Enqueue(rows); };
  for (int rows = 1; rows <= 40; ++rows) {
    *host_base_ = 7 * rows;
    Clear();
    ASSERT_TRUE(cache.RunDecode(rows, enqueue).ok());
    const std::vector<int> replayed = Out();
    Clear();
    ASSERT_TRUE(Enqueue(*cache.BucketFor(rows)).ok());
    EXPECT_EQ(Out(), replayed) << "rows " << rows;
  }
  EXPECT_EQ(cache.captures(), static_cast<int64_t>(cache.buckets().size()));
}

TEST_F(GraphCacheTest, EagerModeCapturesEveryBucketAtStartUp) {
  GraphCache cache(runtime_.get(), CudaGraphMode::kEager, 24);
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
  GraphCache off(runtime_.get(), CudaGraphMode::kOff, 8);
  Clear();
  absl::StatusOr<GraphStepOutcome> disabled = off.RunDecode(3, enqueue);
  ASSERT_TRUE(disabled.ok());
  EXPECT_EQ(disabled->miss, GraphMissReason::kDisabled);
  EXPECT_EQ(RowsWritten(), 3) << "an eager step is not padded";
  EXPECT_EQ(off.misses(GraphMissReason::kDisabled), 1);

  GraphCache lazy(runtime_.get(), CudaGraphMode::kLazy, 8);
  absl::StatusOr<GraphStepOutcome> oversize = lazy.RunDecode(9, enqueue);
  ASSERT_TRUE(oversize.ok());
  EXPECT_EQ(oversize->miss, GraphMissReason::kOversize);
  EXPECT_EQ(lazy.misses(GraphMissReason::kOversize), 1);

  GraphCache eager(runtime_.get(), CudaGraphMode::kEager, 8);  // CaptureAll never called
  absl::StatusOr<GraphStepOutcome> not_captured = eager.RunDecode(2, enqueue);
  ASSERT_TRUE(not_captured.ok());
  EXPECT_EQ(not_captured->miss, GraphMissReason::kEager);

  absl::StatusOr<GraphStepOutcome> prefill = lazy.RunEager(5, enqueue);
  ASSERT_TRUE(prefill.ok());
  EXPECT_FALSE(prefill->miss.has_value());
  EXPECT_FALSE(prefill->replayed);
}

TEST_F(GraphCacheTest, AFailedCaptureLeavesNoGraphAndNoCaptureInProgress) {
  GraphCache cache(runtime_.get(), CudaGraphMode::kLazy, 8);
  auto failing = [](int) { return absl::InternalError("kernel failed"); };
  EXPECT_EQ(cache.RunDecode(2, failing).status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(runtime_->capturing());
  EXPECT_EQ(cache.captures(), 0);
  auto enqueue = [this](int rows) { return Enqueue(rows); };
  absl::StatusOr<GraphStepOutcome> retry = cache.RunDecode(2, enqueue);
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->captured);
}

}  // namespace
}  // namespace tessera::worker
