// What a kernel test (*_kernel_test.cc) runs on, so the same test source runs on the SIMT
// emulator (g++, label cuda-emulated, every schedule of emulator_schedules.h) and on a real GPU
// (nvcc with TESSERA_KERNEL_TEST_ON_GPU=1, label gpu, one "schedule": the hardware's).
//
//   simt::DeviceBuffer<T>   device memory the host can index after a launch returns (emulated:
//                           guard-page host memory; GPU: managed memory)
//   simt::TestLauncher      a Launcher (kernels/cuda/launch_shape.h) built from a schedule;
//                           on the GPU it synchronises after each launch, so results are ready
//   simt::TestSchedules()   the schedules a test is parameterised over
//   simt::KernelTest        the fixture base (parameter: the schedule), SingleKernelTest for a
//                           test that is not parameterised; on the GPU each test skips, with
//                           the reason, when there is no GPU and none is expected, and fails
//                           when one is (tests/testing/gpu_expectation.h)
#pragma once

#ifndef TESSERA_KERNEL_TEST_ON_GPU
#define TESSERA_KERNEL_TEST_ON_GPU 0  // the emulated build
#endif

#if TESSERA_KERNEL_TEST_ON_GPU

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_launcher.h"
#include "tests/testing/gpu_expectation.h"
#include "tests/unit/cuda/device_buffer.h"

namespace tessera::simt {

// The GPU schedules itself; one parameter value stands for it.
struct Schedule {
  std::string ToString() const { return "gpu"; }
};
inline std::vector<Schedule> TestSchedules() { return {Schedule{}}; }
inline std::string ScheduleTestName(const Schedule&) { return "gpu"; }
inline void PrintTo(const Schedule&, std::ostream* out) { *out << "gpu"; }

struct GpuLaunchResult {
  cuda::CudaLaunchResult result;
  bool ok() const { return result.ok(); }
  friend std::ostream& operator<<(std::ostream& out, const GpuLaunchResult& r) {
    return out << cuda::DescribeLaunch(r.result);
  }
};

class TestLauncher {
 public:
  explicit TestLauncher(const Schedule& = {}) : launcher_(nullptr) {}
  template <typename... Params, typename... Args>
  GpuLaunchResult Launch(const cuda::LaunchShape& shape, void (*kernel)(Params...),
                         Args&&... args) {
    cuda::CudaLaunchResult result = launcher_.Launch(shape, kernel, std::forward<Args>(args)...);
    if (result.ok()) result.error = cudaDeviceSynchronize();
    return {result};
  }
  template <typename... Params>
  GpuLaunchResult AllowDynamicShared(void (*kernel)(Params...), size_t bytes) {
    return {launcher_.AllowDynamicShared(kernel, bytes)};
  }

 private:
  cuda::CudaLauncher launcher_;
};

// Skips the current test, with the reason, when no GPU or driver is present and none is
// expected (tests/testing/gpu_expectation.h); where a GPU is expected that fails the test with
// the error's name. Any other CUDA error fails it everywhere.
inline void RequireGpu() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    cudaGetLastError();  // clear it: later runtime calls must not report it again
    testing_util::SkipOrFailWithoutGpu(std::string(cudaGetErrorName(error)) + " (" +
                                       cudaGetErrorString(error) + ")");
    return;
  }
  ASSERT_EQ(error, cudaSuccess) << cudaGetErrorName(error) << ": " << cudaGetErrorString(error);
}

// Bases of every kernel test (parameterised by schedule, or single).
class KernelTest : public ::testing::TestWithParam<Schedule> {
 protected:
  void SetUp() override { RequireGpu(); }
};
class SingleKernelTest : public ::testing::Test {
 protected:
  void SetUp() override { RequireGpu(); }
};

}  // namespace tessera::simt

#else  // the SIMT emulator

#include "kernels/simt/emulated_launcher.h"
#include "tests/unit/cuda/device_buffer.h"
#include "tests/unit/cuda/emulator_schedules.h"

#include <gtest/gtest.h>

namespace tessera::simt {
using TestLauncher = EmulatedLauncher;
using KernelTest = ::testing::TestWithParam<Schedule>;
using SingleKernelTest = ::testing::Test;
}  // namespace tessera::simt

#endif
