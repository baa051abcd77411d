// The tensor-core and async-copy wrappers (kernels/cuda/ptx_ops.cuh) on the emulator, each
// checked alone against the PTX ISA's tables and a plain matmul: mma with hand-built fragments,
// ldmatrix register contents lane by lane, then ldmatrix + cp.async + mma together; and a
// planted missing cp.async wait that must produce wrong results.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cuda/ptx_ops.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using ptx::MmaType;
using simt::DeviceBuffer;

__device__ uint32_t PackPair(const __nv_bfloat16* row_major, int stride, int row, int col) {
  const uint16_t low = __bfloat16_as_ushort(row_major[row * stride + col]);
  const uint16_t high = __bfloat16_as_ushort(row_major[row * stride + col + 1]);
  return low | (uint32_t{high} << 16);
}

// Fragments built by hand from the PTX ISA table (no ldmatrix): a [16x16], b [16x8] (k-major),
// d [16x8], all row-major.
__global__ void MmaFromTable(const __nv_bfloat16* a, const __nv_bfloat16* b_transposed,
                             const float* c, float* d) {
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  uint32_t a_regs[4], b_regs[2];
  float c_regs[4], d_regs[4];
  for (int r = 0; r < 4; ++r) a_regs[r] = PackPair(a, 16, g + 8 * (r & 1), 2 * t + 8 * (r >> 1));
  for (int r = 0; r < 2; ++r) b_regs[r] = PackPair(b_transposed, 16, g, 2 * t + 8 * r);
  for (int i = 0; i < 4; ++i) c_regs[i] = c[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
  ptx::MmaM16N8K16<MmaType::kBf16>(d_regs, a_regs, b_regs, c_regs);
  for (int i = 0; i < 4; ++i) d[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = d_regs[i];
}

// Each lane's ldmatrix.x4 registers over a 16x16 tile whose element (r, c) holds r * 16 + c.
__global__ void LdMatrixRegisters(const uint16_t* tile, uint32_t* out, bool transpose) {
  TESSERA_SHARED(uint16_t, shared, 256);
  for (int i = threadIdx.x; i < 256; i += 32) shared[i] = tile[i];
  __syncthreads();
  const int lane = threadIdx.x, matrix = lane / 8, row = lane % 8;
  const uint16_t* address = shared + (row + 8 * (matrix & 1)) * 16 + 8 * (matrix >> 1);
  uint32_t regs[4];
  if (transpose) {
    ptx::LdMatrix<4, true>(regs, address);
  } else {
    ptx::LdMatrix<4>(regs, address);
  }
  for (int j = 0; j < 4; ++j) out[lane * 4 + j] = regs[j];
}

// The whole path a GEMM tile uses: cp.async global->shared, ldmatrix, mma. b is k-major
// [16x8] (loaded with ldmatrix.trans). `with_wait` false is the planted bug.
__global__ void TileMatmul(const __nv_bfloat16* a, const __nv_bfloat16* b, float* d,
                           bool with_wait) {
  TESSERA_SHARED(__nv_bfloat16, a_tile, 256);
  TESSERA_SHARED(__nv_bfloat16, b_tile, 128);
  const int lane = threadIdx.x;
  ptx::CpAsync16(a_tile + lane * 8, a + lane * 8);  // 32 lanes x 16 bytes = the 16x16 tile
  if (lane < 16) ptx::CpAsync16(b_tile + lane * 8, b + lane * 8);
  ptx::CpAsyncCommit();
  if (with_wait) ptx::CpAsyncWait<0>();
  __syncthreads();
  const int matrix = lane / 8, row = lane % 8;
  uint32_t a_regs[4], b_regs[2];
  ptx::LdMatrix<4>(a_regs, a_tile + (row + 8 * (matrix & 1)) * 16 + 8 * (matrix >> 1));
  ptx::LdMatrix<2, true>(b_regs, b_tile + (row + 8 * (matrix & 1)) * 8);
  const float zero[4] = {0, 0, 0, 0};
  float d_regs[4];
  ptx::MmaM16N8K16<MmaType::kBf16>(d_regs, a_regs, b_regs, zero);
  const int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) d[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = d_regs[i];
}

std::vector<__nv_bfloat16> RandomBf16(size_t n, std::mt19937& rng) {
  return simt::Convert<__nv_bfloat16>(simt::RandomFloats(n, rng));
}

// d = a [16x16] · b [16x8] + c in f64, b given k-major.
std::vector<double> ReferenceMatmul(const std::vector<__nv_bfloat16>& a,
                                    const std::vector<__nv_bfloat16>& b,
                                    const std::vector<float>& c) {
  std::vector<double> d(128);
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      double sum = c.empty() ? 0.0 : c[m * 8 + n];
      for (int k = 0; k < 16; ++k) sum += double(simt::AsFloat(a[m * 16 + k])) * simt::AsFloat(b[k * 8 + n]);
      d[m * 8 + n] = sum;
    }
  }
  return d;
}

class PtxOpsTest : public simt::KernelTest {};

TEST_P(PtxOpsTest, MmaWithTableFragmentsEqualsPlainMatmul) {
  std::mt19937 rng(7);
  const auto a = RandomBf16(256, rng), b = RandomBf16(128, rng);
  const auto c = simt::RandomFloats(128, rng);
  std::vector<__nv_bfloat16> b_transposed(128);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) b_transposed[n * 16 + k] = b[k * 8 + n];
  DeviceBuffer<__nv_bfloat16> d_a{std::span<const __nv_bfloat16>(a)};
  DeviceBuffer<__nv_bfloat16> d_bt{std::span<const __nv_bfloat16>(b_transposed)};
  DeviceBuffer<float> d_c{std::span<const float>(c)}, d_d(128);
  simt::TestLauncher launcher(GetParam());
  ASSERT_TRUE(launcher.Launch(LaunchShape{dim3(1), dim3(32)}, MmaFromTable, d_a.get(), d_bt.get(),
                              d_c.get(), d_d.get()).ok());
  const auto expected = ReferenceMatmul(a, b, c);
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(d_d[i], expected[i], 1e-5 * (1 + std::fabs(expected[i]))) << i;
}

TEST_P(PtxOpsTest, LdMatrixFollowsTheIsaTable) {
  std::vector<uint16_t> tile(256);
  for (int i = 0; i < 256; ++i) tile[i] = static_cast<uint16_t>(i);
  DeviceBuffer<uint16_t> d_tile{std::span<const uint16_t>(tile)};
  for (bool transpose : {false, true}) {
    DeviceBuffer<uint32_t> out(128);
    simt::TestLauncher launcher(GetParam());
    ASSERT_TRUE(launcher.Launch(LaunchShape{dim3(1), dim3(32)}, LdMatrixRegisters,
                                static_cast<const uint16_t*>(d_tile.get()), out.get(), transpose)
                    .ok());
    for (int lane = 0; lane < 32; ++lane) {
      for (int j = 0; j < 4; ++j) {
        const int base_row = 8 * (j & 1), base_col = 8 * (j >> 1);
        int r0 = lane / 4, c0 = 2 * (lane % 4), r1 = r0, c1 = c0 + 1;
        if (transpose) r0 = 2 * (lane % 4), c0 = lane / 4, r1 = r0 + 1, c1 = c0;
        const uint32_t expected = uint32_t((base_row + r0) * 16 + base_col + c0) |
                                  uint32_t((base_row + r1) * 16 + base_col + c1) << 16;
        EXPECT_EQ(out[lane * 4 + j], expected) << "lane " << lane << " reg " << j << " trans " << transpose;
      }
    }
  }
}

// Runs TileMatmul on a and b; returns d [16x8] (empty if the launch failed).
std::vector<float> RunTileMatmul(const simt::Schedule& schedule,
                                 const std::vector<__nv_bfloat16>& a,
                                 const std::vector<__nv_bfloat16>& b, bool with_wait) {
  DeviceBuffer<__nv_bfloat16> d_a{std::span<const __nv_bfloat16>(a)};
  DeviceBuffer<__nv_bfloat16> d_b{std::span<const __nv_bfloat16>(b)};
  DeviceBuffer<float> d_d(128);
  simt::TestLauncher launcher(schedule);
  const auto status = launcher.Launch(LaunchShape{dim3(1), dim3(32)}, TileMatmul,
                                      static_cast<const __nv_bfloat16*>(d_a.get()),
                                      static_cast<const __nv_bfloat16*>(d_b.get()), d_d.get(),
                                      with_wait);
  EXPECT_TRUE(status.ok()) << status;
  return status.ok() ? d_d.ToHost() : std::vector<float>{};
}

TEST_P(PtxOpsTest, CpAsyncLdMatrixMmaTileEqualsPlainMatmul) {
  std::mt19937 rng(11);
  const auto a = RandomBf16(256, rng), b = RandomBf16(128, rng);
  const std::vector<float> d = RunTileMatmul(GetParam(), a, b, true);
  ASSERT_EQ(d.size(), 128u);
  const auto expected = ReferenceMatmul(a, b, {});
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(d[i], expected[i], 1e-5 * (1 + std::fabs(expected[i]))) << i;
}

#if !TESSERA_KERNEL_TEST_ON_GPU
// The emulator poisons cp.async destinations until the wait (a GPU may or may not have finished).
TEST_P(PtxOpsTest, MissingCpAsyncWaitReadsPoisonNotData) {
  std::mt19937 rng(13);
  const std::vector<float> d =
      RunTileMatmul(GetParam(), RandomBf16(256, rng), RandomBf16(128, rng), false);
  ASSERT_EQ(d.size(), 128u);
  int non_finite = 0;
  for (float value : d) non_finite += !std::isfinite(value);
  EXPECT_EQ(non_finite, 128) << "every output must come from poisoned (NaN) shared memory";
}
#endif

INSTANTIATE_TEST_SUITE_P(Schedules, PtxOpsTest, ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
