#include "kernels/cuda/device_query.h"

#include <gtest/gtest.h>

namespace tessera::cuda {
namespace {

TEST(CudaVersions, ReportsRuntimeWhenBuiltWithCuda) {
  auto versions = QueryCudaVersions();
  if (!BuiltWithCuda()) {
    EXPECT_EQ(versions.status().code(), absl::StatusCode::kUnavailable);
    GTEST_SKIP() << "built without CUDA: " << versions.status().message();
  }
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_GE(versions->runtime_version, 12000);  // the toolkit we build with is 12.x or newer
}

TEST(CudaDevices, EveryVisibleDeviceHasSaneProperties) {
  auto devices = QueryCudaDevices();
  if (!devices.ok()) {
    EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable);
    GTEST_SKIP() << "no CUDA GPU: " << devices.status().message();
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
