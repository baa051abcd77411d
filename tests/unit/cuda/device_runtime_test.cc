// The device runtime contract (kernels/device/device_runtime.h), one source for both devices:
// built with TESSERA_TEST_CUDA_DEVICE=0 it runs on the emulated device (label cuda-emulated),
// with 1 on the real GPU (tests/gpu, label gpu), skipping only when no GPU or driver is there and
// none is expected (tests/testing/gpu_expectation.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "kernels/device/device_memory.h"
#include "kernels/device/device_runtime.h"
#include "kernels/device/emulated_gemm.h"
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

std::vector<double> F64ReferenceGemm(const std::vector<float>& a, const std::vector<float>& b,
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
  // On a GPU other processes (the kit runs test binaries in parallel) change the free memory
  // between two readings, so the allocation must show in one of a few tries, not in each.
  bool reduced = false;
  for (int attempt = 0; attempt < 5 && !reduced; ++attempt) {
    const uint64_t before = *runtime_->FreeMemoryBytes();
    Allocate(8 << 20);
    reduced = *runtime_->FreeMemoryBytes() <= before - (8 << 20);
  }
  EXPECT_TRUE(reduced) << "five 8 MiB allocations never reduced the free memory by 8 MiB";
  EXPECT_GT(runtime_->properties().total_memory_bytes, uint64_t{8} << 20);
  EXPECT_FALSE(runtime_->properties().name.empty());
}

// A matrix of `count` values uniform in [-1, 1], stored as `type` (so the reference reads the
// very values the device does).
std::vector<uint8_t> RandomMatrix(DataType type, size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint8_t> bytes(count * DataTypeBytes(type));
  for (size_t i = 0; i < count; ++i) {
    const float value = dist(rng);
    if (type == DataType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &value, 4);
    } else if (type == DataType::kBf16) {
      const __nv_bfloat16 stored = __float2bfloat16_rn(value);
      std::memcpy(bytes.data() + 2 * i, &stored, 2);
    } else {
      const __half stored = __float2half_rn(value);
      std::memcpy(bytes.data() + 2 * i, &stored, 2);
    }
  }
  return bytes;
}

float ValueAt(DataType type, const std::vector<uint8_t>& bytes, size_t i) {
  if (type == DataType::kF32) {
    float value;
    std::memcpy(&value, bytes.data() + 4 * i, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes.data() + 2 * i, 2);
  if (type == DataType::kBf16) return __bfloat162float(__nv_bfloat16_raw{bits});
  return __half2float(__half_raw{bits});
}

// The largest |device - reference| allowed for c[i, j], the reference being the emulated device's
// GEMM (emulated_gemm.h: f32 sum in increasing k, rounded once to c's type). Both f32 sums lie
// within k·u·Σ|a·b| of the exact dot product whatever their order (Higham, Accuracy and
// Stability, §3.1), so they differ by at most 2·k·u·Σ|a·b|; u = 2^-23 rather than 2^-24 because
// tensor-core accumulation may truncate instead of rounding to nearest. Rounding the two sums to
// c's type then adds at most one unit in the last place at that magnitude: 2^-7 relative for
// bf16 (8 significant bits), 2^-10 for f16 (11 bits) plus its subnormal step 2^-24, nothing for
// f32.
double GemmTolerance(DataType c_type, int64_t k, double abs_dot, double reference) {
  const double sums = 2.0 * static_cast<double>(k) * std::ldexp(1.0, -23) * abs_dot;
  const double magnitude = std::abs(reference) + sums;
  switch (c_type) {
    case DataType::kF32: return sums;
    case DataType::kBf16: return sums + std::ldexp(magnitude, -7);
    case DataType::kF16: return sums + std::ldexp(magnitude, -10) + std::ldexp(1.0, -24);
  }
  return 0;
}

const char* TypeName(DataType type) {
  return type == DataType::kF32 ? "f32" : type == DataType::kBf16 ? "bf16" : "f16";
}

struct GemmTypes {
  DataType inputs;  // a and b (cuBLAS's GemmEx takes both in one type)
  DataType output;
};

// c = a·bᵀ for every input/output type pair the runner may use, on awkward shapes: m = 1, 3, 17
// rows, n and k not multiples of 8 (ValidateGemm asks only for positive sizes and set pointers;
// cuBLAS takes any leading dimension for these types), against the emulated device's GEMM
// (emulated_gemm.h) within GemmTolerance.
TEST_F(DeviceRuntimeTest, GemmMatchesTheReferenceForEveryOutputType) {
  std::mt19937 rng(3);
  const GemmTypes types[] = {{DataType::kF32, DataType::kF32},
                             {DataType::kBf16, DataType::kF32},
                             {DataType::kBf16, DataType::kBf16},
                             {DataType::kF16, DataType::kF32},
                             {DataType::kF16, DataType::kF16}};
  const std::pair<int, int> nks[] = {{33, 70}, {7, 13}, {64, 129}};
  for (const GemmTypes& t : types) {
    for (int m : {1, 3, 17}) {
      for (auto [n, k] : nks) {
        SCOPED_TRACE(::testing::Message() << TypeName(t.inputs) << " -> " << TypeName(t.output)
                                          << ", m=" << m << " n=" << n << " k=" << k);
        const std::vector<uint8_t> a = RandomMatrix(t.inputs, size_t(m) * k, rng);
        const std::vector<uint8_t> b = RandomMatrix(t.inputs, size_t(n) * k, rng);
        const size_t c_bytes = size_t(m) * n * DataTypeBytes(t.output);
        void* d_a = Allocate(a.size());
        void* d_b = Allocate(b.size());
        void* d_c = Allocate(c_bytes);
        ASSERT_TRUE(runtime_->CopyToDevice(d_a, a.data(), a.size()).ok());
        ASSERT_TRUE(runtime_->CopyToDevice(d_b, b.data(), b.size()).ok());
        ASSERT_TRUE(runtime_->Gemm({t.inputs, t.inputs, t.output, d_a, d_b, d_c, m, n, k}).ok());
        std::vector<uint8_t> c(c_bytes), expected(c_bytes);
        ASSERT_TRUE(runtime_->CopyToHost(c.data(), d_c, c.size()).ok());
        ASSERT_TRUE(runtime_->Synchronize().ok());
        EmulatedGemm({t.inputs, t.inputs, t.output, a.data(), b.data(), expected.data(), m, n,
                      k});
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < n; ++j) {
            double abs_dot = 0;
            for (int p = 0; p < k; ++p) {
              abs_dot += std::abs(double(ValueAt(t.inputs, a, size_t(i) * k + p)) *
                                  ValueAt(t.inputs, b, size_t(j) * k + p));
            }
            const size_t at = size_t(i) * n + j;
            const double want = ValueAt(t.output, expected, at);
            ASSERT_NEAR(ValueAt(t.output, c, at), want,
                        GemmTolerance(t.output, k, abs_dot, want))
                << "c[" << i << ", " << j << "]";
          }
        }
      }
    }
  }
}

// A captured graph runs nothing until replayed, and each replay reads the host input as it is
// at that moment: replay == eager for a new input. The host buffers a graph copies are the
// runtime's (pinned on a GPU, where a capture of pageable copies is not allowed).
TEST_F(DeviceRuntimeTest, GraphReplayEqualsEagerExecution) {
  const int m = 3, n = 5, k = 8;
  std::vector<float> host_b(n * k);
  absl::StatusOr<HostMemory> a_memory = HostMemory::Allocate(*runtime_, m * k * 4);
  absl::StatusOr<HostMemory> c_memory = HostMemory::Allocate(*runtime_, m * n * 4);
  ASSERT_TRUE(a_memory.ok() && c_memory.ok());
  const std::span<float> host_a(a_memory->as<float>(), m * k), host_c(c_memory->as<float>(), m * n);
  std::fill(host_a.begin(), host_a.end(), 0.0f);
  std::fill(host_c.begin(), host_c.end(), -1.0f);
  for (int i = 0; i < n * k; ++i) host_b[i] = 0.25f * (i % 7) - 0.5f;
  void* d_a = Allocate(host_a.size() * 4);
  void* d_b = Allocate(host_b.size() * 4);
  void* d_c = Allocate(host_c.size() * 4);
  ASSERT_TRUE(runtime_->CopyToDevice(d_b, host_b.data(), host_b.size() * 4).ok());
  ASSERT_TRUE(runtime_->Synchronize().ok());
  ASSERT_TRUE(runtime_->BeginCapture().ok());
  EXPECT_TRUE(runtime_->capturing());
  ASSERT_TRUE(runtime_->CopyToDevice(d_a, host_a.data(), host_a.size() * 4).ok());
  ASSERT_TRUE(
      runtime_->Gemm({DataType::kF32, DataType::kF32, DataType::kF32, d_a, d_b, d_c, m, n, k})
          .ok());
  ASSERT_TRUE(runtime_->CopyToHost(host_c.data(), d_c, host_c.size() * 4).ok());
  absl::StatusOr<GraphHandle> graph = runtime_->EndCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(runtime_->Synchronize().ok());
  EXPECT_EQ(host_c[0], -1.0f) << "capture must not execute";
  for (int round = 1; round <= 2; ++round) {
    for (int i = 0; i < m * k; ++i) host_a[i] = 0.125f * round * ((i % 5) - 2);
    ASSERT_TRUE(runtime_->Replay(*graph).ok());
    ASSERT_TRUE(runtime_->Synchronize().ok());
    const std::vector<float> a(host_a.begin(), host_a.end());
    const std::vector<double> expected = F64ReferenceGemm(a, host_b, m, n, k);
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
