// The device sampler's shared-memory set-up (DeviceKernels::PrepareSampling) on the emulated
// device, which applies CUDA's rule: 48 KiB per block unless the kernel opted in. A vocabulary
// whose penalty bitmap needs more opts in; one beyond the device's per-block maximum is a
// one-line error at start-up naming the sizes, not a failed launch mid-serving.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/device/device_runtime.h"
#include "worker/cuda/device_kernels.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

class PrepareSamplingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto runtime = device::OpenDevice({.kind = device::DeviceKind::kEmulated,
                                       .emulated_memory_bytes = uint64_t{16} << 20});
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = std::move(*runtime);
    auto kernels = MakeDeviceKernels(*runtime_);
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    kernels_ = std::move(*kernels);
  }

  std::unique_ptr<device::DeviceRuntime> runtime_;
  std::unique_ptr<DeviceKernels> kernels_;
};

TEST_F(PrepareSamplingTest, VocabulariesWhoseBitmapFitsTheDeviceAreAccepted) {
  EXPECT_TRUE(kernels_->PrepareSampling(151936).ok());   // 19 KB: no opt-in needed
  EXPECT_TRUE(kernels_->PrepareSampling(1000000).ok());  // 125 KB: opts in
}

TEST_F(PrepareSamplingTest, AVocabularyBeyondTheDevicesSharedMemoryIsOneClearError) {
  const absl::Status status = kernels_->PrepareSampling(2000000);  // 250 KB > 227 KiB
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("vocabulary of 2000000 tokens"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("250000 bytes of shared memory"));
}

}  // namespace
}  // namespace tessera::worker
