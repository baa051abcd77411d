// The CUDA device query. A test skips only when the machine has no GPU to test and none is
// expected (tests/testing/gpu_expectation.h): a build without CUDA, or the runtime reporting no
// device / no driver (UNAVAILABLE, whose message names the CUDA error). Where a GPU is expected
// those fail; any other error always fails: it is a broken driver or runtime, not a missing GPU.
// The skip messages are the ones tests/skip_allowlist.txt accepts.
#include "kernels/cuda/device_query.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/gpu_expectation.h"

namespace tessera::cuda {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

TEST(CudaVersions, ReportsRuntimeWhenBuiltWithCuda) {
  auto versions = QueryCudaVersions();
  if (!BuiltWithCuda()) {
    // ASSERT (not EXPECT) before the skip: a failure followed by a skip would read as a skip.
    ASSERT_EQ(versions.status().code(), absl::StatusCode::kUnavailable) << versions.status();
    testing_util::SkipOrFailWithoutGpu("built without CUDA: " +
                                       std::string(versions.status().message()));
    return;
  }
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_GE(versions->runtime_version, 12000);  // the toolkit we build with is 12.x or newer
}

TEST(CudaDevices, EveryVisibleDeviceHasSaneProperties) {
  auto devices = QueryCudaDevices();
  if (!devices.ok()) {
    ASSERT_EQ(devices.status().code(), absl::StatusCode::kUnavailable)
        << "a CUDA error other than no device / no driver: " << devices.status();
    if (BuiltWithCuda()) {
      ASSERT_THAT(std::string(devices.status().message()),
                  AnyOf(HasSubstr("cudaErrorNoDevice"), HasSubstr("cudaErrorInsufficientDriver"),
                        HasSubstr("cudaErrorStubLibrary"), HasSubstr("no CUDA device is visible")))
          << "UNAVAILABLE for a reason that is not a missing GPU or driver";
    }
    testing_util::SkipOrFailWithoutGpu(std::string(devices.status().message()));
    return;
  }
  ASSERT_FALSE(devices->empty());
  for (const CudaDeviceInfo& device : *devices) {
    EXPECT_FALSE(device.name.empty());
    EXPECT_GE(device.compute_major, 5) << device.name;
    EXPECT_GT(device.total_memory_bytes, uint64_t{1} << 30) << device.name;
    EXPECT_GT(device.multiprocessor_count, 0) << device.name;
  }
}

}  // namespace
}  // namespace tessera::cuda
