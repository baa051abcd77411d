// GGUF -> bf16 load-time dequantization kernel on the emulator vs common/gguf's CPU decoders
// (f32, then rounded to bf16), for every supported format, random but valid blocks, rows of 1, 3
// and 5 blocks, aligned and misaligned buffers, under every test schedule.
//
// Tolerance: none. The kernel performs the CPU decoder's f32 operations in the same order (and
// on the GPU through __fmul_rn, so no fma contraction), then one round-to-nearest-even to bf16:
// the bf16 bit patterns must be identical.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "common/gguf/dequantize.h"
#include "kernels/cuda/dequantize.cuh"
#include "tests/unit/cuda/kernel_test_env.h"
#include "tests/unit/cuda/random_gguf_blocks.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

// dst_offset / src_offset shift the buffers off their 16-byte alignment (scalar paths).
void CheckDequantize(const simt::Schedule& schedule, const FormatCase& c, int64_t rows,
                     int64_t blocks_per_row, int dst_offset, int src_offset, std::mt19937& rng) {
  const int64_t cols = blocks_per_row * BlockElements(c.format);
  const int64_t num_elements = rows * cols;
  const std::vector<uint8_t> bytes = RandomBlocks(c, rows * blocks_per_row, rng);
  ASSERT_EQ(static_cast<int64_t>(bytes.size()), rows * GgufRowBytes(c.format, cols));
  std::vector<uint8_t> shifted(src_offset, 0);
  shifted.insert(shifted.end(), bytes.begin(), bytes.end());
  DeviceBuffer<uint8_t> d_src{std::span<const uint8_t>(shifted)};
  DeviceBuffer<__nv_bfloat16> d_dst(num_elements + dst_offset);
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(LaunchDequantizeToBf16(launcher, c.format,
                                     static_cast<const uint8_t*>(d_src.get()) + src_offset,
                                     d_dst.get() + dst_offset, rows, cols)
                  .ok());

  absl::StatusOr<std::vector<float>> expected =
      gguf::DequantizeToF32(c.ggml_type, bytes, static_cast<uint64_t>(num_elements));
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int64_t i = 0; i < num_elements; ++i) {
    const uint16_t got = __bfloat16_as_ushort(d_dst[dst_offset + i]);
    ASSERT_EQ(got, gguf::FloatToBf16((*expected)[i]))
        << "format " << static_cast<int>(c.format) << " rows=" << rows << " cols=" << cols
        << " element " << i << " expected " << (*expected)[i];
  }
}

class DequantizeKernelTest : public simt::KernelTest {};

TEST_P(DequantizeKernelTest, MatchesCpuDecoderBitForBit) {
  std::mt19937 rng(77);
  for (const FormatCase& c : Formats()) {
    SCOPED_TRACE(static_cast<int>(c.format));
    for (int64_t blocks_per_row : {1, 3, 5}) {
      for (int64_t rows : {1, 3, 17}) {
        CheckDequantize(GetParam(), c, rows, blocks_per_row, 0, 0, rng);
      }
    }
    CheckDequantize(GetParam(), c, 3, 3, /*dst_offset=*/1, /*src_offset=*/2, rng);
  }
}

TEST_P(DequantizeKernelTest, PlainFormatsAtAwkwardLengths) {
  std::mt19937 rng(78);
  for (const FormatCase& c : Formats()) {
    if (BlockElements(c.format) != 1) continue;
    for (int64_t cols : {1, 15, 16, 17, 97}) {
      CheckDequantize(GetParam(), c, 3, cols, 0, 0, rng);
      CheckDequantize(GetParam(), c, 1, cols, 1, 1, rng);
    }
  }
}

TEST_P(DequantizeKernelTest, UnknownFormatIsALaunchError) {
  DeviceBuffer<uint8_t> d_src(64);
  DeviceBuffer<__nv_bfloat16> d_dst(32);
  simt::TestLauncher launcher(GetParam());
  EXPECT_FALSE(LaunchDequantizeToBf16(launcher, static_cast<GgufFormat>(99),
                                      static_cast<const uint8_t*>(d_src.get()), d_dst.get(), 1, 32)
                   .ok());
}

INSTANTIATE_TEST_SUITE_P(Schedules, DequantizeKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
