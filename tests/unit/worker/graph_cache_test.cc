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

#include "common/util/status_macros.h"
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

// out[offset + i] = base[0] * scale + i for i < rows: the piecewise tests' token-shaped and
// sequence-shaped work.
__global__ void FillKernel(const int* base, int* out, int rows, int offset, int scale) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows) out[offset + i] = base[0] * scale + i;
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

  absl::Status Fill(int rows, int offset, int scale) {
    const cuda::LaunchShape shape{dim3(cuda::CeilDiv(rows, 64)), dim3(64)};
    const int* base = base_;
#if TESSERA_TEST_CUDA_DEVICE
    const cuda::CudaLaunchResult launched =
        cuda::CudaLauncher(runtime_->stream())
            .Launch(shape, FillKernel, base, out_, rows, offset, scale);
    if (!launched.ok()) return absl::InternalError(cuda::DescribeLaunch(launched));
    return absl::OkStatus();
#else
    return runtime_->launcher().Launch(shape, FillKernel, base, out_, rows, offset, scale);
#endif
  }

  // A model as StepPieces sees it: token-shaped work over `tokens` rows (out[0, tokens)), a
  // sequence-shaped op over this step's `sequences` (out[100, ...), its count a host value), more
  // token-shaped work (out[200, tokens)), then the tail (out[290, +4)). The inputs (base) are
  // copied before the pass, as the runner uploads its step inputs.
  absl::Status ModelPass(StepPieces& pieces, int tokens, int sequences) {
    if (pieces.TokenWork()) TESSERA_RETURN_IF_ERROR(Fill(tokens, 0, 1));
    TESSERA_ASSIGN_OR_RETURN(const bool attend, pieces.SequenceWork(/*tail=*/false));
    if (attend) TESSERA_RETURN_IF_ERROR(Fill(sequences, 100, 2));
    if (pieces.TokenWork()) TESSERA_RETURN_IF_ERROR(Fill(tokens, 200, 3));
    TESSERA_ASSIGN_OR_RETURN(const bool head, pieces.SequenceWork(/*tail=*/true));
    if (head) TESSERA_RETURN_IF_ERROR(Fill(4, 290, 4));
    if (pieces.TokenWork()) TESSERA_RETURN_IF_ERROR(Fill(2, 296, 5));  // after the tail: eager
    return absl::OkStatus();
  }
  absl::Status Upload(int base) {
    *host_base_ = base;
    return runtime_->CopyToDevice(base_, host_base_, sizeof(int));
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

TEST(GraphTokenBuckets, FollowTheDesignedSteps) {
  EXPECT_THAT(GraphTokenBuckets(1), ElementsAre(1));
  EXPECT_THAT(GraphTokenBuckets(20), ElementsAre(1, 2, 4, 8, 16, 20));
  const std::vector<int> b = GraphTokenBuckets(2048);
  for (int size : {248, 256, 272, 496, 512, 544, 1024, 1088, 1984, 2048}) {
    EXPECT_TRUE(std::binary_search(b.begin(), b.end(), size)) << size;
  }
  EXPECT_FALSE(std::binary_search(b.begin(), b.end(), 264));
  EXPECT_EQ(b.size(), 83u);  // 1, 2, 4, 8; 31 up to 256; 16 in each octave after
  // Above 256 tokens a step pads by less than 1/16 of its own tokens.
  for (size_t i = 1; i < b.size(); ++i) {
    if (b[i - 1] < 256) continue;
    EXPECT_LT((b[i] - b[i - 1] - 1) * 16, b[i - 1] + 1) << b[i - 1] << " -> " << b[i];
  }
  EXPECT_EQ(b.back(), 2048);
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

  // Without pieces, a step with prefill rows runs one whole pass, counted as disabled.
  std::vector<StepPieces::Mode> modes;
  auto pass = [&](StepPieces::Mode mode) {
    modes.push_back(mode);
    return Enqueue(5);
  };
  absl::StatusOr<GraphStepOutcome> prefill = lazy.RunMixed(5, pass);
  ASSERT_TRUE(prefill.ok());
  EXPECT_EQ(prefill->miss, GraphMissReason::kDisabled);
  EXPECT_FALSE(prefill->replayed);
  EXPECT_THAT(modes, ElementsAre(StepPieces::Mode::kWhole));
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

// Steps with prefill rows: the first step of a token bucket captures one graph per stretch of
// token-shaped work (a warm-up pass, then a capture pass), and every step of the bucket replays
// them with its sequence-shaped work enqueued between them, eagerly, at its own sizes.
TEST_F(GraphCacheTest, MixedStepsReplayTheirTokenBucketPiecewise) {
  StepPieces pieces(runtime_.get());
  GraphCache cache(runtime_.get(), CudaGraphMode::kLazy, 8, &pieces, 64);
  std::vector<StepPieces::Mode> modes;
  int sequences = 3;
  auto pass = [&](StepPieces::Mode mode) {
    modes.push_back(mode);
    return ModelPass(pieces, cache.TokensToRun(5), sequences);
  };
  EXPECT_EQ(cache.TokensToRun(5), 8);
  Clear();
  ASSERT_TRUE(Upload(10).ok());
  absl::StatusOr<GraphStepOutcome> first = cache.RunMixed(5, pass);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->replayed && first->captured);
  EXPECT_EQ(first->rows, 8);
  EXPECT_THAT(modes, ElementsAre(StepPieces::Mode::kWarmUp, StepPieces::Mode::kCapture,
                                 StepPieces::Mode::kReplay));
  EXPECT_EQ(cache.graphs_held(), 2) << "two stretches: before the sequence op and before the tail";
  std::vector<int> out = Out();
  EXPECT_EQ(out[7], 17);
  EXPECT_EQ(out[8], -1) << "token-shaped work covers the bucket, no more";
  EXPECT_EQ(out[102], 22);
  EXPECT_EQ(out[103], -1);
  EXPECT_EQ(out[207], 37);
  EXPECT_EQ(out[293], 43);
  EXPECT_EQ(out[297], 51);

  // The same bucket with new inputs and more sequences: replayed, nothing captured.
  modes.clear();
  sequences = 6;
  Clear();
  ASSERT_TRUE(Upload(20).ok());
  absl::StatusOr<GraphStepOutcome> second = cache.RunMixed(7, pass);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->replayed);
  EXPECT_FALSE(second->captured);
  EXPECT_THAT(modes, ElementsAre(StepPieces::Mode::kReplay));
  out = Out();
  EXPECT_EQ(out[0], 20);
  EXPECT_EQ(out[7], 27);
  EXPECT_EQ(out[105], 45) << "the sequence op ran at this step's count";
  EXPECT_EQ(out[106], -1);
  EXPECT_EQ(out[200], 60);
  EXPECT_EQ(out[290], 80);
  EXPECT_EQ(out[296], 100);
  EXPECT_EQ(cache.replays(), 2);
  EXPECT_EQ(cache.mixed_captures(), 1);
  EXPECT_EQ(cache.captures(), 0);
  EXPECT_FALSE(runtime_->capturing());
}

TEST_F(GraphCacheTest, EagerModeCapturesEveryTokenBucketAtStartUp) {
  StepPieces pieces(runtime_.get());
  GraphCache cache(runtime_.get(), CudaGraphMode::kEager, 4, &pieces, 20);
  std::vector<int> captured;
  ASSERT_TRUE(cache
                  .CaptureAllMixed([&](int tokens, StepPieces::Mode mode) {
                    if (mode == StepPieces::Mode::kCapture) captured.push_back(tokens);
                    return ModelPass(pieces, tokens, 1);
                  })
                  .ok());
  EXPECT_THAT(captured, ElementsAre(1, 2, 4, 8, 16, 20));
  EXPECT_EQ(cache.graphs_held(), 12);
  int passes = 0;
  absl::StatusOr<GraphStepOutcome> step = cache.RunMixed(11, [&](StepPieces::Mode mode) {
    ++passes;
    EXPECT_EQ(mode, StepPieces::Mode::kReplay);
    return ModelPass(pieces, 16, 2);
  });
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(step->replayed && !step->captured);
  EXPECT_EQ(passes, 1);
}

// A pass that fails mid-capture leaves no capture open and no graphs; the next step captures.
TEST_F(GraphCacheTest, AFailedPiecewiseCaptureLeavesNothingOpen) {
  StepPieces pieces(runtime_.get());
  GraphCache cache(runtime_.get(), CudaGraphMode::kLazy, 4, &pieces, 32);
  auto failing = [&](StepPieces::Mode mode) -> absl::Status {
    TESSERA_RETURN_IF_ERROR(ModelPass(pieces, 8, 1));
    if (mode == StepPieces::Mode::kCapture) return absl::InternalError("kernel failed");
    return absl::OkStatus();
  };
  EXPECT_EQ(cache.RunMixed(6, failing).status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(runtime_->capturing());
  EXPECT_EQ(cache.mixed_captures(), 0);
  EXPECT_EQ(cache.graphs_held(), 0);
  EXPECT_EQ(pieces.mode(), StepPieces::Mode::kWhole);
  absl::StatusOr<GraphStepOutcome> retry =
      cache.RunMixed(6, [&](StepPieces::Mode) { return ModelPass(pieces, 8, 1); });
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->captured);
}

}  // namespace
}  // namespace tessera::worker
