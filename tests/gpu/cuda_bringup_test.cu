// What a first run on real hardware trips on (issue 22), checked on the GPU (label gpu; nvcc):
// a launch error names its kernel; --cuda-sync-each-launch reports a device fault at the launch
// that caused it, naming the kernel; a thread that never chose a device reaches the runtime's
// device (the step thread is not the thread that opened it); captured cuBLAS GEMMs take no
// device memory of their own (one workspace set at open); host staging memory is pinned.
// Without a GPU every test skips with "no CUDA GPU"; on a machine expected to have one
// (tests/testing/gpu_expectation.h) that fails instead.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/cuda/cuda_launcher.h"
#include "kernels/device/cuda_device_runtime.h"
#include "tests/testing/gpu_expectation.h"

namespace tessera::device {
namespace {

using ::testing::HasSubstr;

__global__ void WriteIndexKernel(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * 3 + 1;
}

__global__ void TrapKernel(int* out) {
  if (threadIdx.x == 0) out[0] = 1;
  __trap();
}

// The runtime on `device_index` (-1: the last visible device); null when it does not open.
std::unique_ptr<CudaDeviceRuntime> OpenRuntime(int device_index, bool sync = false) {
  if (device_index < 0) {
    int count = 0;
    device_index = cudaGetDeviceCount(&count) == cudaSuccess && count > 0 ? count - 1 : 0;
    cudaGetLastError();
  }
  absl::StatusOr<std::unique_ptr<CudaDeviceRuntime>> runtime =
      CudaDeviceRuntime::Open(device_index, sync);
  return runtime.ok() ? *std::move(runtime) : nullptr;
}

// Opens device 0 for each test; without a GPU the test skips, or fails where one is expected.
class CudaBringupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaDeviceRuntime>> runtime = CudaDeviceRuntime::Open(0);
    if (runtime.status().code() == absl::StatusCode::kUnavailable) {
      testing_util::SkipOrFailWithoutGpu(std::string(runtime.status().message()));
      return;
    }
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = *std::move(runtime);
  }

  std::unique_ptr<CudaDeviceRuntime> runtime_;
};

TEST_F(CudaBringupTest, ALaunchErrorNamesItsKernel) {
  CudaDeviceRuntime* runtime = runtime_.get();
  cuda::CudaLauncher launcher(runtime->stream(), {.device = runtime->device_index()});
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 64 * sizeof(int)), cudaSuccess);
  const cuda::CudaLaunchResult result =
      launcher.Launch(cuda::LaunchShape{dim3(1), dim3(4096), 0}, WriteIndexKernel, out, 64);
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(cuda::DescribeLaunch(result), HasSubstr("WriteIndexKernel"));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a configuration error must not stay sticky";
  cudaFree(out);
}

// The fault kills the process's CUDA context, so it runs in a child process.
void TrapWithSyncEachLaunch() {
  auto runtime = OpenRuntime(0, /*sync=*/true);
  if (runtime == nullptr) std::exit(2);
  int* out = nullptr;
  if (cudaMalloc(&out, sizeof(int)) != cudaSuccess) std::exit(2);
  cuda::CudaLauncher launcher(runtime->stream(),
                              {.device = runtime->device_index(), .sync_each_launch = true});
  const cuda::CudaLaunchResult result =
      launcher.Launch(cuda::LaunchShape{dim3(1), dim3(32), 0}, TrapKernel, out);
  std::fprintf(stderr, "%s\n", result.ok() ? "launch reported success"
                                           : cuda::DescribeLaunch(result).c_str());
  std::exit(result.ok() ? 0 : 3);
}

TEST_F(CudaBringupTest, SyncEachLaunchReportsADeviceFaultAtItsLaunchNamingTheKernel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(TrapWithSyncEachLaunch(), ::testing::ExitedWithCode(3), "TrapKernel");
}

// CUDA's current device is per host thread, and a new thread starts on device 0.
TEST_F(CudaBringupTest, AThreadThatNeverChoseADeviceReachesTheRuntimesDevice) {
  auto runtime = OpenRuntime(/*device_index=*/-1);
  ASSERT_NE(runtime, nullptr);
  constexpr int kCount = 1000;
  std::vector<int> got(kCount, -1);
  int device_seen = -1;
  std::thread step_thread([&] {
    absl::StatusOr<void*> memory = runtime->Allocate(kCount * sizeof(int));
    ASSERT_TRUE(memory.ok()) << memory.status();
    int* out = static_cast<int*>(*memory);
    cuda::CudaLauncher launcher(runtime->stream(), {.device = runtime->device_index()});
    const cuda::CudaLaunchResult launched =
        launcher.Launch(cuda::LaunchShape{dim3(4), dim3(256), 0}, WriteIndexKernel, out, kCount);
    EXPECT_TRUE(launched.ok()) << cuda::DescribeLaunch(launched);
    EXPECT_TRUE(runtime->CopyToHost(got.data(), out, kCount * sizeof(int)).ok());
    EXPECT_TRUE(runtime->Synchronize().ok());
    cudaGetDevice(&device_seen);
    runtime->Free(out);
  });
  step_thread.join();
  EXPECT_EQ(device_seen, runtime->device_index());
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(got[i], i * 3 + 1) << i;
}

// Each captured GEMM shape would otherwise get cuBLAS workspace of its own.
TEST_F(CudaBringupTest, CapturedGemmsTakeNoDeviceMemoryOfTheirOwn) {
  CudaDeviceRuntime* runtime = runtime_.get();
  constexpr int64_t kMax = 4096;
  void* a = *runtime->Allocate(kMax * kMax * 2);
  void* b = *runtime->Allocate(kMax * kMax * 2);
  void* c = *runtime->Allocate(kMax * kMax * 2);
  ASSERT_TRUE(runtime->Fill(a, 0x3c, kMax * kMax * 2).ok());
  ASSERT_TRUE(runtime->Fill(b, 0x3c, kMax * kMax * 2).ok());
  const int64_t shapes[][3] = {{1, 4096, 4096}, {8, 14336, 4096}, {64, 4096, 14336},
                               {256, 1536, 1536}, {3, 8960, 1536}, {17, 1536, 8960},
                               {128, 151936 / 64, 1536}, {512, 4096, 4096}};
  // Each shape once eagerly first (as the graph cache warms up): loading cuBLAS's kernels
  // (lazily, on first use) takes device memory that is not the capture's.
  for (const auto& shape : shapes) {
    ASSERT_TRUE(
        runtime->Gemm({.a = a, .b = b, .c = c, .m = shape[0], .n = shape[1], .k = shape[2]}).ok());
  }
  ASSERT_TRUE(runtime->Synchronize().ok());
  // Free memory is the device's: validate.sh runs other test processes beside this one, so one
  // round of captures that took no memory of its own (of five) is the proof; a per-graph
  // workspace would show MiBs in every round.
  int64_t growth = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const uint64_t free_before = *runtime->FreeMemoryBytes();
    for (const auto& shape : shapes) {
      ASSERT_TRUE(runtime->BeginCapture().ok());
      const GemmArgs args{.a = a, .b = b, .c = c, .m = shape[0], .n = shape[1], .k = shape[2]};
      ASSERT_TRUE(runtime->Gemm(args).ok());
      absl::StatusOr<GraphHandle> graph = runtime->EndCapture();
      ASSERT_TRUE(graph.ok()) << graph.status();
      ASSERT_TRUE(runtime->Replay(*graph).ok());
    }
    ASSERT_TRUE(runtime->Synchronize().ok());
    growth = static_cast<int64_t>(free_before) - static_cast<int64_t>(*runtime->FreeMemoryBytes());
    if (growth < (int64_t{8} << 20)) break;
  }
  // Instantiated graphs themselves take a little; a per-graph workspace would be MiBs each.
  EXPECT_LT(growth, int64_t{8} << 20) << "free memory fell by " << growth << " bytes";
  for (void* p : {a, b, c}) runtime->Free(p);
}

TEST_F(CudaBringupTest, HostStagingMemoryIsPinned) {
  CudaDeviceRuntime* runtime = runtime_.get();
  absl::StatusOr<void*> host = runtime->AllocateHost(1 << 20);
  ASSERT_TRUE(host.ok()) << host.status();
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, *host), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  runtime->FreeHost(*host);
}

}  // namespace
}  // namespace tessera::device
