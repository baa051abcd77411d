// The streaming decode path's SwiGlu epilogue (packed_linear.cuh's LaunchPackedLinearSwiGlu:
// out = silu(x·gateᵀ)·(x·upᵀ) of W = [gate | up] in one launch) under every test schedule, on
// fresh random inputs, every scheme, X and out in bf16 and f16, m 1..4, widths a multiple of 8
// features or not:
//  - with a block per tile, the bits of the product launch followed by SwiGluHalves
//    (activations.cuh): each row's k-sum is split at the same stages in both launches;
//  - split across warps and blocks (where the sums may be added in another order), within the
//    packed paths' bound carried through silu·up, against an f64 reference.
// Launches the epilogue must refuse (n odd, m > 4, k not whole stages) are launch errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/packed_linear.cuh"
#include "kernels/cuda/packed_weight.h"
#include "tests/unit/cuda/kernel_test_env.h"
#include "tests/unit/cuda/random_packed_weight.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

// A zeroed streaming workspace for `blocks` blocks, split as `grid` says.
struct Scratch {
  Scratch(int blocks, PackedStreamGrid grid)
      : memory((PackedStreamWorkspaceBytes(blocks) + 3) / 4),
        ws(PackedStreamWorkspaceAt(memory.get(), blocks)) {
    std::memset(memory.get(), 0, memory.size() * sizeof(float));
    ws.grid = grid;
  }
  DeviceBuffer<float> memory;
  PackedStreamWorkspace ws;
};

template <typename T>
std::vector<uint16_t> Bits(const DeviceBuffer<T>& buffer) {
  std::vector<uint16_t> bits(buffer.size());
  std::memcpy(bits.data(), buffer.get(), bits.size() * sizeof(uint16_t));
  return bits;
}

struct Case {
  PackedScheme scheme;
  int m, width, stages;
};

// One fused launch; with `blocks` = 64 and a block per tile (and >= 32 stages: the grid then
// has a block per tile), also the product launch and SwiGluHalves, whose bits it must equal;
// always the f64 reference within the bound.
template <typename T>
void CheckSwiGlu(const simt::Schedule& schedule, const Case& c, std::mt19937& rng, int blocks,
                 PackedStreamGrid grid) {
  const int n = 2 * c.width;
  const int k = c.stages * (c.scheme == PackedScheme::kQ8_0 ? 64 : 128);
  const PackedWeight weight = RandomWeight(c.scheme, n, k, rng);
  const std::vector<float> w = DequantizePacked(weight);
  const float amplitude = c.stages >= 32 ? 0.25f : 2.0f;  // silu(gate)·up within f16 at long k
  const std::vector<T> x =
      simt::Convert<T>(simt::RandomFloats(size_t(c.m) * k, rng, -amplitude, amplitude));
  const DevicePackedWeight d_w(weight);
  DeviceBuffer<T> d_x{std::span<const T>(x)}, d_out(size_t(c.m) * c.width);
  const Scratch scratch(blocks, grid);
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(AllowPackedLinearSharedMemory<T>(launcher).ok());
  const auto status =
      LaunchPackedLinearSwiGlu(launcher, static_cast<const T*>(d_x.get()), c.m, d_w.view,
                               d_out.get(), scratch.ws);
  ASSERT_TRUE(status.ok()) << status;
  const bool same_split = blocks == 64 && grid == PackedStreamGrid::kBlockPerTileWhenTilesFit &&
                          c.stages >= kPackedStreamWarps * kPackedStreamMinStages;
  if (same_split) {
    DeviceBuffer<T> d_y(size_t(c.m) * n), d_two(size_t(c.m) * c.width);
    ASSERT_TRUE(LaunchPackedLinear(launcher, static_cast<const T*>(d_x.get()), c.m, d_w.view,
                                   d_y.get(), scratch.ws)
                    .ok());
    ASSERT_TRUE(LaunchSwiGluFused(launcher, static_cast<const T*>(d_y.get()), d_two.get(), c.m,
                                  c.width)
                    .ok());
    ASSERT_EQ(Bits(d_out), Bits(d_two)) << "the epilogue gave other bits than two launches";
  }
  // |Δout| <= 1.1·B_g·(|u| + B_u) + |silu(g)|·B_u + u_T·(|out| + that) (|silu'| < 1.1), with
  // B the packed paths' bound of each product (packed_linear_kernel_test.cc).
  const double unit = std::is_same_v<T, __half> ? 0x1p-11 : 0x1p-8;
  auto product = [&](int r, int row, double* bound) {
    double ref = 0, magnitude = 0;
    for (int e = 0; e < k; ++e) {
      const double xv = simt::AsFloat(x[size_t(r) * k + e]), wv = w[size_t(row) * k + e];
      ref += xv * wv;
      const float min = GroupMinMagnitude(weight, row, e / PackedGroupSize(c.scheme));
      magnitude += std::fabs(xv) * (std::fabs(wv) + 2.0 * min);
    }
    *bound = unit * std::fabs(ref) + (k + 64) * 0x1p-23 * magnitude;
    return ref;
  };
  for (int r = 0; r < c.m; ++r) {
    for (int f = 0; f < c.width; ++f) {
      double b_g = 0, b_u = 0;
      const double g = product(r, f, &b_g), u = product(r, c.width + f, &b_u);
      const double silu = g / (1.0 + std::exp(-g)), ref = silu * u;
      const double carried = 1.1 * b_g * (std::fabs(u) + b_u) + std::fabs(silu) * b_u;
      const double bound = carried + unit * (std::fabs(ref) + carried) + 1e-6 * std::fabs(ref);
      const double got = simt::AsFloat(d_out[size_t(r) * c.width + f]);
      ASSERT_LE(std::fabs(got - ref), bound)
          << "scheme " << int(c.scheme) << " m " << c.m << " width " << c.width << " out[" << r
          << "][" << f << "] = " << got << ", ref " << ref << " (gate " << g << ", up " << u
          << ")";
    }
  }
}

class PackedSwiGluKernelTest : public simt::KernelTest {};

// Short tiles: warps share tiles across tile boundaries, in one block or two.
const Case kCases[] = {
    {PackedScheme::kQ4_0, 1, 24, 3},  {PackedScheme::kQ4_1, 2, 20, 9},
    {PackedScheme::kQ4_K, 3, 40, 6},  {PackedScheme::kQ8_0, 4, 12, 5},
    {PackedScheme::kNvfp4, 1, 36, 4}, {PackedScheme::kNvfp4, 4, 16, 9},
    {PackedScheme::kMxfp4, 2, 8, 3},
};

// At >= 32 stages a tile, each launch takes a block per tile: both split a row's k-sum at the
// same stages.
TEST_P(PackedSwiGluKernelTest, SameBitsAsTheProductThenSwiGluHalves) {
  std::mt19937 rng(2101);
  const Case cases[] = {
      {PackedScheme::kQ4_0, 1, 24, 33},  {PackedScheme::kQ4_1, 2, 20, 33},
      {PackedScheme::kQ4_K, 3, 16, 34},  {PackedScheme::kQ8_0, 4, 12, 33},
      {PackedScheme::kNvfp4, 1, 36, 33}, {PackedScheme::kNvfp4, 4, 16, 33},
      {PackedScheme::kMxfp4, 2, 8, 33},
  };
  for (const Case& c : cases) {
    CheckSwiGlu<__nv_bfloat16>(GetParam(), c, rng, 64,
                               PackedStreamGrid::kBlockPerTileWhenTilesFit);
    CheckSwiGlu<__half>(GetParam(), c, rng, 64, PackedStreamGrid::kBlockPerTileWhenTilesFit);
  }
}

// Tiles shared by warps of one block and of two (a grid of 1 and 2 blocks; every resident
// block where the tiles would fit), and a block per tile.
TEST_P(PackedSwiGluKernelTest, SplitAcrossWarpsAndBlocksWithinTheBound) {
  std::mt19937 rng(2102);
  for (const Case& c : kCases) {
    for (int blocks : {1, 2}) {
      CheckSwiGlu<__nv_bfloat16>(GetParam(), c, rng, blocks,
                                 PackedStreamGrid::kEveryResidentBlock);
    }
    CheckSwiGlu<__half>(GetParam(), c, rng, 64, PackedStreamGrid::kBlockPerTileWhenTilesFit);
  }
}

TEST_P(PackedSwiGluKernelTest, RefusesWhatTheEpilogueCannotTake) {
  std::mt19937 rng(2103);
  const PackedWeight weight = RandomWeight(PackedScheme::kQ4_0, 32, 256, rng);
  const DevicePackedWeight d_w(weight);
  DeviceBuffer<__nv_bfloat16> d_x(size_t(8) * 256), d_out(size_t(8) * 32);
  const Scratch scratch(4, PackedStreamGrid::kBlockPerTileWhenTilesFit);
  simt::TestLauncher launcher(GetParam());
  ASSERT_TRUE(AllowPackedLinearSharedMemory<__nv_bfloat16>(launcher).ok());
  auto launch = [&](int m, const PackedLinear& w) {
    EXPECT_EQ(PackedLinearSwiGluTakes(m, w),
              LaunchPackedLinearSwiGlu(launcher, static_cast<const __nv_bfloat16*>(d_x.get()),
                                       m, w, d_out.get(), scratch.ws)
                  .ok());
    return PackedLinearSwiGluTakes(m, w);
  };
  EXPECT_TRUE(launch(4, d_w.view));
  EXPECT_FALSE(launch(5, d_w.view));  // m > 4
  PackedLinear odd = d_w.view;
  odd.n = 31;
  EXPECT_FALSE(launch(1, odd));  // no two halves (nor a packed shape: n % 8)
  PackedLinear short_k = d_w.view;
  short_k.k = 192;
  EXPECT_FALSE(launch(1, short_k));  // k % 128
}

INSTANTIATE_TEST_SUITE_P(Schedules, PackedSwiGluKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
