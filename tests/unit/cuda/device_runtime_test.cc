// The device runtime contract (kernels/device/device_runtime.h), one source for both devices:
// built with TESSERA_TEST_CUDA_DEVICE=0 it runs on the emulated device (label cuda-emulated),
// with 1 on the real GPU (tests/gpu, label gpu), skipping only when no GPU or driver is there and
// none is expected (tests/testing/gpu_expectation.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernels/device/device_runtime.h"
#include "tests/testing/gpu_expectation.h"
#if !TESSERA_TEST_CUDA_DEVICE
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/device/emulated_device_runtime.h"
#endif

namespace tessera::device {
namespace {

using ::testing::HasSubstr;

class DeviceRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceOptions options;
    options.kind = TESSERA_TEST_CUDA_DEVICE ? DeviceKind::kCuda : DeviceKind::kEmulated;
    options.emulated_memory_bytes = 64 << 20;
    absl::StatusOr<std::unique_ptr<DeviceRuntime>> runtime = OpenDevice(options);
    if (TESSERA_TEST_CUDA_DEVICE && runtime.status().code() == absl::StatusCode::kUnavailable) {
      testing_util::SkipOrFailWithoutGpu(std::string(runtime.status().message()));
      return;
    }
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = std::move(*runtime);
  }

  void* Allocate(size_t bytes) {
    absl::StatusOr<void*> pointer = runtime_->Allocate(bytes);
    EXPECT_TRUE(pointer.ok()) << pointer.status();
    allocations_.push_back(*pointer);
    return *pointer;
  }

  void TearDown() override {
    for (void* pointer : allocations_) runtime_->Free(pointer);
  }

  std::unique_ptr<DeviceRuntime> runtime_;
  std::vector<void*> allocations_;
};

std::vector<double> ReferenceGemm(const std::vector<float>& a, const std::vector<float>& b,
                                  int m, int n, int k) {
  std::vector<double> c(size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) c[size_t(i) * n + j] += double(a[size_t(i) * k + p]) * b[size_t(j) * k + p];
  return c;
}

TEST_F(DeviceRuntimeTest, CopiesRoundTrip) {
  std::vector<uint8_t> in(1001), out(1001, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
  void* first = Allocate(in.size());
  void* second = Allocate(in.size());
  ASSERT_TRUE(runtime_->CopyToDevice(first, in.data(), in.size()).ok());
  ASSERT_TRUE(runtime_->CopyOnDevice(second, first, in.size()).ok());
  ASSERT_TRUE(runtime_->Fill(first, 0xAB, 10).ok());
  ASSERT_TRUE(runtime_->CopyToHost(out.data(), second, out.size()).ok());
  ASSERT_TRUE(runtime_->Synchronize().ok());
  EXPECT_EQ(out, in);
  ASSERT_TRUE(runtime_->CopyToHost(out.data(), first, out.size()).ok());
  ASSERT_TRUE(runtime_->Synchronize().ok());
  EXPECT_EQ(out[9], 0xAB);
  EXPECT_EQ(out[10], in[10]);
}

TEST_F(DeviceRuntimeTest, AllocationReducesFreeMemory) {
  const uint64_t before = *runtime_->FreeMemoryBytes();
  Allocate(8 << 20);
  EXPECT_LE(*runtime_->FreeMemoryBytes(), before - (8 << 20));
  EXPECT_GT(runtime_->properties().total_memory_bytes, uint64_t{8} << 20);
  EXPECT_FALSE(runtime_->properties().name.empty());
}

// c = a·bᵀ for m = 1, 3, 17 against an f64 reference; bf16 inputs, f32 and bf16 outputs.
TEST_F(DeviceRuntimeTest, GemmMatchesReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  const int n = 33, k = 70;
  for (int m : {1, 3, 17}) {
    std::vector<float> a(size_t(m) * k), b(size_t(n) * k);
    std::vector<__nv_bfloat16> a16(a.size()), b16(b.size());
    for (size_t i = 0; i < a.size(); ++i) a16[i] = __float2bfloat16_rn(dist(rng)), a[i] = __bfloat162float(a16[i]);
    for (size_t i = 0; i < b.size(); ++i) b16[i] = __float2bfloat16_rn(dist(rng)), b[i] = __bfloat162float(b16[i]);
    void* d_a = Allocate(a16.size() * 2);
    void* d_b = Allocate(b16.size() * 2);
    void* d_c = Allocate(size_t(m) * n * 4);
    ASSERT_TRUE(runtime_->CopyToDevice(d_a, a16.data(), a16.size() * 2).ok());
    ASSERT_TRUE(runtime_->CopyToDevice(d_b, b16.data(), b16.size() * 2).ok());
    GemmArgs args{DataType::kBf16, DataType::kBf16, DataType::kF32, d_a, d_b, d_c, m, n, k};
    ASSERT_TRUE(runtime_->Gemm(args).ok());
    std::vector<float> c(size_t(m) * n);
    ASSERT_TRUE(runtime_->CopyToHost(c.data(), d_c, c.size() * 4).ok());
    ASSERT_TRUE(runtime_->Synchronize().ok());
    const std::vector<double> expected = ReferenceGemm(a, b, m, n, k);
    // f32 accumulation of 70 products of magnitude <= 1: |error| <= 70 * 2^-24 * sum|terms|.
    for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], expected[i], 1e-4) << "m=" << m << " i=" << i;
  }
}

// A captured graph runs nothing until replayed, and each replay reads the host input as it is
// at that moment: replay == eager for a new input.
TEST_F(DeviceRuntimeTest, GraphReplayEqualsEagerExecution) {
  const int m = 3, n = 5, k = 8;
  std::vector<float> host_a(m * k), host_b(n * k), host_c(m * n, -1.0f);
  for (int i = 0; i < n * k; ++i) host_b[i] = 0.25f * (i % 7) - 0.5f;
  void* d_a = Allocate(host_a.size() * 4);
  void* d_b = Allocate(host_b.size() * 4);
  void* d_c = Allocate(host_c.size() * 4);
  ASSERT_TRUE(runtime_->CopyToDevice(d_b, host_b.data(), host_b.size() * 4).ok());
  ASSERT_TRUE(runtime_->Synchronize().ok());
  ASSERT_TRUE(runtime_->BeginCapture().ok());
  EXPECT_TRUE(runtime_->capturing());
  ASSERT_TRUE(runtime_->CopyToDevice(d_a, host_a.data(), host_a.size() * 4).ok());
  ASSERT_TRUE(runtime_->Gemm({DataType::kF32, DataType::kF32, DataType::kF32, d_a, d_b, d_c, m, n, k}).ok());
  ASSERT_TRUE(runtime_->CopyToHost(host_c.data(), d_c, host_c.size() * 4).ok());
  absl::StatusOr<GraphHandle> graph = runtime_->EndCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(runtime_->Synchronize().ok());
  EXPECT_EQ(host_c[0], -1.0f) << "capture must not execute";
  for (int round = 1; round <= 2; ++round) {
    for (int i = 0; i < m * k; ++i) host_a[i] = 0.125f * round * ((i % 5) - 2);
    ASSERT_TRUE(runtime_->Replay(*graph).ok());
    ASSERT_TRUE(runtime_->Synchronize().ok());
    const std::vector<double> expected = ReferenceGemm(host_a, host_b, m, n, k);
    for (int i = 0; i < m * n; ++i) EXPECT_NEAR(host_c[i], expected[i], 1e-5) << "round " << round;
  }
}

TEST_F(DeviceRuntimeTest, EventsMeasureElapsedTime) {
  absl::StatusOr<EventHandle> start = runtime_->CreateEvent(), end = runtime_->CreateEvent();
  ASSERT_TRUE(start.ok() && end.ok());
  EXPECT_FALSE(runtime_->ElapsedSeconds(*start, *end).ok()) << "events never recorded";
  void* buffer = Allocate(1 << 20);
  ASSERT_TRUE(runtime_->RecordEvent(*start).ok());
  ASSERT_TRUE(runtime_->Fill(buffer, 1, 1 << 20).ok());
  ASSERT_TRUE(runtime_->RecordEvent(*end).ok());
  absl::StatusOr<double> seconds = runtime_->ElapsedSeconds(*start, *end);
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_GE(*seconds, 0.0);
  EXPECT_LT(*seconds, 10.0);
}

TEST_F(DeviceRuntimeTest, MisuseGetsClearErrors) {
  EXPECT_EQ(runtime_->EndCapture().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(runtime_->Replay(42).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime_->RecordEvent(7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime_->Gemm({}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(runtime_->BeginCapture().ok());
  EXPECT_EQ(runtime_->BeginCapture().code(), absl::StatusCode::kFailedPrecondition);
  const absl::StatusOr<void*> during = runtime_->Allocate(64);
  EXPECT_EQ(during.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(during.status().message(), HasSubstr("capture"));
  ASSERT_TRUE(runtime_->EndCapture().ok());
}

#if !TESSERA_TEST_CUDA_DEVICE
TEST(EmulatedDevice, RefusesToAllocateBeyondItsMemory) {
  DeviceOptions options;
  options.emulated_memory_bytes = 1 << 20;
  auto runtime = OpenDevice(options);
  ASSERT_TRUE(runtime.ok());
  const absl::StatusOr<void*> too_big = (*runtime)->Allocate(2 << 20);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_big.status().message(), HasSubstr("out of memory"));
}

// Kernel launches through the emulated stream launcher are recorded during capture (arguments
// copied at launch) and run on each replay.
TEST(EmulatedDevice, CapturedKernelLaunchesRunOnReplay) {
  EmulatedDeviceRuntime runtime(16 << 20, simt::Schedule::Reverse());
  const int rows = 2, hidden = 40;
  float* x = static_cast<float*>(*runtime.Allocate(rows * hidden * 4));
  float* weight = static_cast<float*>(*runtime.Allocate(hidden * 4));
  float* out = static_cast<float*>(*runtime.Allocate(rows * hidden * 4));
  for (int i = 0; i < rows * hidden; ++i) x[i] = 1.0f + (i % 3);
  for (int i = 0; i < hidden; ++i) weight[i] = 2.0f;
  std::fill(out, out + rows * hidden, -7.0f);
  ASSERT_TRUE(runtime.BeginCapture().ok());
  ASSERT_TRUE(cuda::LaunchRmsNorm(runtime.launcher(), static_cast<const float*>(x),
                                  static_cast<float*>(nullptr), static_cast<const float*>(weight),
                                  out, rows, hidden, 1e-6f).ok());
  const absl::StatusOr<GraphHandle> graph = runtime.EndCapture();
  ASSERT_TRUE(graph.ok());
  EXPECT_EQ(out[0], -7.0f) << "a captured launch must not run";
  for (float scale : {1.0f, 3.0f}) {
    for (int i = 0; i < rows * hidden; ++i) x[i] = scale * (1.0f + (i % 3));
    ASSERT_TRUE(runtime.Replay(*graph).ok());
    double mean_square = 0;
    for (int i = 0; i < hidden; ++i) mean_square += double(x[i]) * x[i] / hidden;
    EXPECT_NEAR(out[0], x[0] / std::sqrt(mean_square + 1e-6) * 2.0, 1e-5);
  }
  for (void* pointer : {static_cast<void*>(x), static_cast<void*>(weight), static_cast<void*>(out)}) {
    runtime.Free(pointer);
  }
}

// Asking for the real GPU from the emulated build's test: where a GPU is expected it opens;
// elsewhere the error is one line (the worker prints it as its exit message). Never a skip, so
// the test counts on a GPU machine too.
TEST(CudaDeviceSelection, OpensWhereAGpuIsExpectedElseReportsAOneLineReason) {
  DeviceOptions options;
  options.kind = DeviceKind::kCuda;
  absl::StatusOr<std::unique_ptr<DeviceRuntime>> runtime = OpenDevice(options);
  if (runtime.ok()) {  // a GPU (also one without /dev/nvidia* nodes, as under WSL)
    EXPECT_FALSE((*runtime)->properties().name.empty());
    return;
  }
  const testing_util::GpuExpectation expectation = testing_util::CurrentGpuExpectation();
  ASSERT_FALSE(expectation.expected)
      << "a GPU is expected (" << expectation.why << ") but: " << runtime.status();
  EXPECT_THAT(runtime.status().code(),
              ::testing::AnyOf(absl::StatusCode::kUnavailable,
                               absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(runtime.status().message().empty());
  EXPECT_EQ(std::string(runtime.status().message()).find('\n'), std::string::npos);
}
#endif

}  // namespace
}  // namespace tessera::device
