// The caps on the managed memory that kernel tests allocate on a GPU (device_buffer.h): a buffer
// over 256 MiB, or live buffers over 1 GiB, abort the binary with a message naming the request
// and the cap, before CUDA is asked for anything (so this runs, and passes, without a GPU too).
// Built only for the GPU (tests/gpu/gpu_kernel_tests.cmake): the emulated allocator has its own
// limit.
#include <gtest/gtest.h>

#include <cstdint>

#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::simt {
namespace {

TEST(CudaDeviceBufferCapDeathTest, OneBufferOverTheCapAbortsNamingIt) {
  EXPECT_DEATH(DeviceBuffer<uint8_t>(kMaxManagedBufferBytes + 1),
               "cannot allocate 268435457 bytes of managed memory \\(0 bytes live\\): over the "
               "256 MiB per-buffer cap");
}

TEST(CudaDeviceBufferCapDeathTest, LiveBuffersOverTheCapAbortNamingIt) {
  EXPECT_DEATH(
      {
        LiveManagedBytes() = kMaxManagedLiveBytes - 64;  // as if 1 GiB - 64 bytes were held
        DeviceBuffer<uint8_t> one_too_many(65);
      },
      "cannot allocate 65 bytes of managed memory \\(1073741760 bytes live\\): over the 1 GiB "
      "cap on live managed memory");
}

}  // namespace
}  // namespace tessera::simt
