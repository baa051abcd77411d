// Linear layers over packed weights (kernels/cuda/packed_linear.cuh) under every test schedule,
// on fresh random inputs: every path (small-m CUDA cores for m <= 8, the tensor-core decode path
// for m <= 16, shared-memory tensor-core tiles for every m) and the dispatching launch, every
// scheme, X and Y in bf16 and f16, m in {1, 3, 8, 13, 17, 129}, k in
// {256, 320, 576} ({256, 512, 768} for Q4_K), n in {64, 136, 192} (each m with every k and
// every n), against the exact reference ref = Σ_k x_k·w_k in f64 over DequantizePacked's f32
// weights and x as T holds it:
//   |y − ref| <= u_T·|ref| + (k + 64)·2^-23·Σ_k |x_k|·(|w_k| + 2|min_g|)
// (u_bf16 = 2^-8, u_f16 = 2^-11; the sum bounds packed_linear.cuh's Σ|x|·(|s·c| + |min|)).
// Y is poisoned with NaN before each launch, so an element left unwritten fails. Preconditions
// the launch must refuse are launch errors. Also the dequantization to a dense matrix
// (packed_dequantize.cuh): bit for bit the reference rounded once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/util/half.h"
#include "kernels/cuda/packed_dequantize.cuh"
#include "kernels/cuda/packed_linear.cuh"
#include "kernels/cuda/packed_weight.h"
#include "tests/unit/cuda/kernel_test_env.h"
#include "tests/unit/cuda/random_packed_weight.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

enum class Path { kSmallM, kStream, kTc, kMma, kDispatch };

// The streaming path's workspace (packed_stream_split.h), zeroed as the worker zeroes it.
struct StreamScratch {
  explicit StreamScratch(int blocks,
                         PackedStreamGrid grid = PackedStreamGrid::kBlockPerTileWhenTilesFit)
      : memory((PackedStreamWorkspaceBytes(blocks) + 3) / 4),
        ws(PackedStreamWorkspaceAt(memory.get(), blocks)) {
    std::memset(memory.get(), 0, memory.size() * sizeof(float));
    ws.grid = grid;
  }
  bool CountersAtZero() const {
    for (int i = 0; i < ws.blocks * kPackedStreamWarps; ++i) {
      if (ws.arrivals[i] != 0u) return false;
    }
    return true;
  }
  DeviceBuffer<float> memory;
  PackedStreamWorkspace ws;
};

template <typename T>
auto Launch(simt::TestLauncher& launcher, Path path, const T* x, int m, const PackedLinear& w,
            T* y, const PackedStreamWorkspace& ws = StreamScratch(4).ws) {
  EXPECT_TRUE(AllowPackedLinearSharedMemory<T>(launcher).ok());  // as PreparePackedLinear does
  switch (w.scheme) {
#define TESSERA_PATH_CASE(S)                                                                      \
  case PackedScheme::S:                                                                           \
    if (path == Path::kSmallM)                                                                    \
      return LaunchPackedLinearSmallM<simt::TestLauncher, T, PackedScheme::S>(launcher, x, m, w,  \
                                                                              y);                 \
    if (path == Path::kStream)                                                                    \
      return LaunchPackedLinearStream<simt::TestLauncher, T, PackedScheme::S>(launcher, x, m, w,  \
                                                                              y, ws);             \
    if (path == Path::kTc)                                                                        \
      return LaunchPackedLinearTc<simt::TestLauncher, T, PackedScheme::S>(launcher, x, m, w, y);  \
    if (path == Path::kMma)                                                                       \
      return LaunchPackedLinearMma<simt::TestLauncher, T, PackedScheme::S>(launcher, x, m, w, y); \
    break;
    TESSERA_PATH_CASE(kQ8_0)
    TESSERA_PATH_CASE(kQ4_0)
    TESSERA_PATH_CASE(kQ4_1)
    TESSERA_PATH_CASE(kQ4_K)
    TESSERA_PATH_CASE(kNvfp4)
    TESSERA_PATH_CASE(kMxfp4)
#undef TESSERA_PATH_CASE
  }
  return LaunchPackedLinear(launcher, x, m, w, y, ws);
}

// One launch (the streaming path over a workspace of `stream_blocks` blocks, split as
// `stream_grid` says) checked against the reference; the streaming and dispatching launches run
// twice over their workspace, which each must leave at zero, with the same bits.
template <typename T>
void CheckLinear(const simt::Schedule& schedule, Path path, PackedScheme scheme, int m, int n,
                 int k, std::mt19937& rng, bool tiny_scales = false, int stream_blocks = 4,
                 PackedStreamGrid stream_grid = PackedStreamGrid::kBlockPerTileWhenTilesFit) {
  const PackedWeight weight = RandomWeight(scheme, n, k, rng, tiny_scales);
  const std::vector<float> w = DequantizePacked(weight);
  const std::vector<T> x = simt::Convert<T>(simt::RandomFloats(size_t(m) * k, rng, -2, 2));
  const DevicePackedWeight d_w(weight);
  DeviceBuffer<T> d_x{std::span<const T>(x)}, d_y(size_t(m) * n);
  const StreamScratch scratch(stream_blocks, stream_grid);
  simt::TestLauncher launcher(schedule);
  std::vector<uint16_t> first;
  for (int round = 0; round < (path == Path::kStream || path == Path::kDispatch ? 2 : 1);
       ++round) {
    for (size_t i = 0; i < d_y.size(); ++i)
      d_y[i] = simt::FloatTo<T>(std::numeric_limits<float>::quiet_NaN());
    const auto status = Launch(launcher, path, static_cast<const T*>(d_x.get()), m, d_w.view,
                               d_y.get(), scratch.ws);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_TRUE(scratch.CountersAtZero()) << "a launch left an arrival counter set";
    std::vector<uint16_t> bits(d_y.size());
    std::memcpy(bits.data(), d_y.get(), bits.size() * sizeof(uint16_t));
    if (round == 1) {
      ASSERT_EQ(bits, first) << "the second launch gave other bits";
    }
    first = std::move(bits);
  }
  const double unit = std::is_same_v<T, __half> ? 0x1p-11 : 0x1p-8;
  for (int r = 0; r < m; ++r) {
    for (int j = 0; j < n; ++j) {
      double ref = 0, magnitude = 0;
      for (int e = 0; e < k; ++e) {
        const double xv = simt::AsFloat(x[size_t(r) * k + e]), wv = w[size_t(j) * k + e];
        ref += xv * wv;
        magnitude +=
            std::fabs(xv) *
            (std::fabs(wv) + 2.0 * GroupMinMagnitude(weight, j, e / PackedGroupSize(scheme)));
      }
      const double got = simt::AsFloat(d_y[size_t(r) * n + j]);
      const double bound = unit * std::fabs(ref) + (k + 64) * 0x1p-23 * magnitude;
      ASSERT_TRUE(std::fabs(got - ref) <= bound)
          << "scheme " << int(scheme) << " path " << int(path) << " m " << m << " n " << n << " k "
          << k << " y[" << r << "][" << j << "] = " << got << ", ref " << ref << ", bound "
          << bound;
    }
  }
}

// Each m with every k and every n: (m_i, k_j, n_{(i + j) % 3}).
std::vector<std::tuple<int, int, int>> Shapes(PackedScheme scheme) {
  const int ms[] = {1, 3, 8, 13, 17, 129}, ns[] = {64, 136, 192};
  const std::vector<int> ks =
      scheme == PackedScheme::kQ4_K ? std::vector{256, 512, 768} : std::vector{256, 320, 576};
  std::vector<std::tuple<int, int, int>> shapes;
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 3; ++j) shapes.emplace_back(ms[i], ns[(i + j) % 3], ks[j]);
  }
  return shapes;
}

// The streaming path's shapes: m 1..4, k a multiple of a stage (the 8 warps' slices uneven or
// empty), n a multiple of 16 or not.
std::vector<std::tuple<int, int, int>> StreamShapes(PackedScheme scheme) {
  const int stage = scheme == PackedScheme::kQ8_0 ? 64 : 128;
  const std::vector<int> ks = scheme == PackedScheme::kQ4_K
                                  ? std::vector{256, 768, 2304}
                                  : std::vector{stage, 3 * stage, 9 * stage};
  return {{1, 24, ks[0]}, {1, 64, ks[2]}, {2, 40, ks[1]}, {3, 64, ks[2]}, {4, 24, ks[1]}};
}

void CheckScheme(const simt::Schedule& schedule, PackedScheme scheme, unsigned seed) {
  std::mt19937 rng(seed);
  for (auto [m, n, k] : StreamShapes(scheme)) {
    SCOPED_TRACE(testing::Message() << "stream m " << m << " n " << n << " k " << k);
    CheckLinear<__nv_bfloat16>(schedule, Path::kStream, scheme, m, n, k, rng);
    CheckLinear<__half>(schedule, Path::kStream, scheme, m, n, k, rng);
  }
  for (auto [m, n, k] : Shapes(scheme)) {
    SCOPED_TRACE(testing::Message() << "m " << m << " n " << n << " k " << k);
    if (m <= kPackedSmallMMaxM) {
      CheckLinear<__nv_bfloat16>(schedule, Path::kSmallM, scheme, m, n, k, rng);
      CheckLinear<__half>(schedule, Path::kSmallM, scheme, m, n, k, rng);
    }
    if (m <= kPackedTcMaxM) {
      CheckLinear<__nv_bfloat16>(schedule, Path::kTc, scheme, m, n, k, rng);
      CheckLinear<__half>(schedule, Path::kTc, scheme, m, n, k, rng);
    }
    CheckLinear<__nv_bfloat16>(schedule, Path::kMma, scheme, m, n, k, rng);
    CheckLinear<__half>(schedule, Path::kMma, scheme, m, n, k, rng);
  }
}

class PackedLinearKernelTest : public simt::KernelTest {};

TEST_P(PackedLinearKernelTest, Q8_0) { CheckScheme(GetParam(), PackedScheme::kQ8_0, 2001); }
TEST_P(PackedLinearKernelTest, Q4_0) { CheckScheme(GetParam(), PackedScheme::kQ4_0, 2002); }
TEST_P(PackedLinearKernelTest, Q4_1) { CheckScheme(GetParam(), PackedScheme::kQ4_1, 2003); }
TEST_P(PackedLinearKernelTest, Q4_K) { CheckScheme(GetParam(), PackedScheme::kQ4_K, 2004); }
TEST_P(PackedLinearKernelTest, Nvfp4) { CheckScheme(GetParam(), PackedScheme::kNvfp4, 2005); }
TEST_P(PackedLinearKernelTest, Nvfp4SubnormalScales) {
  std::mt19937 rng(2009);
  for (Path path : {Path::kSmallM, Path::kStream, Path::kTc, Path::kMma}) {
    CheckLinear<__nv_bfloat16>(GetParam(), path, PackedScheme::kNvfp4, 3, 64, 256, rng, true);
    CheckLinear<__half>(GetParam(), path, PackedScheme::kNvfp4, 3, 64, 256, rng, true);
  }
}
TEST_P(PackedLinearKernelTest, Mxfp4) { CheckScheme(GetParam(), PackedScheme::kMxfp4, 2006); }

// The streaming path over stage counts that split unevenly between its warps (some with one
// stage or none), rows past n, the schemes with mins and super-scales and NVFP4's column split.
TEST_P(PackedLinearKernelTest, StreamUnevenSlices) {
  std::mt19937 rng(2010);
  CheckLinear<__nv_bfloat16>(GetParam(), Path::kStream, PackedScheme::kQ4_K, 1, 24, 2816, rng);
  CheckLinear<__half>(GetParam(), Path::kStream, PackedScheme::kNvfp4, 3, 40, 1408, rng);
  CheckLinear<__nv_bfloat16>(GetParam(), Path::kStream, PackedScheme::kQ8_0, 2, 16, 704, rng);
  CheckLinear<__nv_bfloat16>(GetParam(), Path::kStream, PackedScheme::kQ4_1, 4, 24, 640, rng);
}

// The streaming path's split (packed_stream_split.h) under grids that give a warp several
// tiles, a tile to several warps of one block (shared-memory meetings) or of two (workspace
// meetings), and warps no units; each launch twice over one workspace.
TEST_P(PackedLinearKernelTest, StreamSplitsTilesBetweenWarps) {
  std::mt19937 rng(2012);
  for (int blocks : {1, 2, 3, 64}) {
    SCOPED_TRACE(testing::Message() << "blocks " << blocks);
    CheckLinear<__nv_bfloat16>(GetParam(), Path::kStream, PackedScheme::kQ4_0, 1, 16, 2304, rng,
                               false, blocks);  // 18 stages, one tile: 8 warps meet
    CheckLinear<__half>(GetParam(), Path::kStream, PackedScheme::kNvfp4, 2, 136, 640, rng, false,
                        blocks);  // 9 tiles x 5 stages over 1 or 2 blocks
    CheckLinear<__nv_bfloat16>(GetParam(), Path::kStream, PackedScheme::kQ4_K, 4, 520, 256, rng,
                               false, blocks);  // 33 tiles x 2 stages over 1 to 3 blocks
    CheckLinear<__nv_bfloat16>(GetParam(), Path::kStream, PackedScheme::kQ8_0, 3, 32, 2560, rng,
                               false, blocks);  // 2 tiles x 40 stages: a block per tile
  }
}

// Tiles that fit the grid split over every resident block all the same (o and down at more
// warps per SM), each tile met across blocks: 2 tiles x 40 stages over 3 blocks (a block per
// tile would be 2), 3 x 40 over 4, and 3 x 36 over 4 with the last tile's rows past n.
TEST_P(PackedLinearKernelTest, StreamSplitsFittingTilesOverEveryBlock) {
  std::mt19937 rng(2013);
  constexpr auto kEvery = PackedStreamGrid::kEveryResidentBlock;
  CheckLinear<__nv_bfloat16>(GetParam(), Path::kStream, PackedScheme::kQ8_0, 3, 32, 2560, rng,
                             false, 3, kEvery);
  CheckLinear<__nv_bfloat16>(GetParam(), Path::kStream, PackedScheme::kQ4_0, 1, 48, 5120, rng,
                             false, 4, kEvery);
  CheckLinear<__half>(GetParam(), Path::kStream, PackedScheme::kNvfp4, 4, 40, 4608, rng, false,
                      64, kEvery);
}

// Start and WarpOf agree: every unit belongs to the warp WarpOf names, for any grid.
TEST(PackedStreamSplitTest, EveryUnitHasOneWarp) {
  for (int units = 1; units <= 150; ++units) {
    for (int warps = 1; warps <= 80; ++warps) {
      const PackedStreamSplit split{.stages = 1, .units = units, .warps = warps};
      ASSERT_EQ(split.Start(0), 0);
      ASSERT_EQ(split.Start(warps), units);
      for (int u = 0; u < units; ++u) {
        const int owner = split.WarpOf(u);
        ASSERT_TRUE(owner >= 0 && owner < warps && split.Start(owner) <= u &&
                    u < split.Start(owner + 1))
            << "unit " << u << " of " << units << " over " << warps << " warps: " << owner;
      }
    }
  }
  EXPECT_EQ(PackedStreamBlocks(1, 1, 264), 1);
  EXPECT_EQ(PackedStreamBlocks(256, 32, 264), 256);   // o (4096 x 4096, Q4): a tile per block
  EXPECT_EQ(PackedStreamBlocks(256, 112, 264), 256);  // down (4096 x 14336): a tile per block
  EXPECT_EQ(PackedStreamBlocks(1792, 32, 264), 264);  // gate | up: every resident block
  EXPECT_EQ(PackedStreamBlocks(64, 2, 264), 4);       // 4 stages per warp
  constexpr auto kEvery = PackedStreamGrid::kEveryResidentBlock;
  EXPECT_EQ(PackedStreamBlocks(256, 112, 396, kEvery), 396);  // down over 3 blocks per SM
  EXPECT_EQ(PackedStreamBlocks(256, 32, 396, kEvery), 256);   // o: 4 stages per warp at most
  EXPECT_EQ(PackedStreamBlocks(2, 40, 3, kEvery), 3);
}

// The meetings of one launch never share a counter or a record (the emulator runs blocks one
// at a time, so two tiles meeting at once on a GPU are checked here): for every shared tile,
// its counter (its first warp, in the workspace or its block's shared memory) and each owner's
// record slot (its first tile's or its last's) are distinct from every other shared tile's.
TEST(PackedStreamSplitTest, SharedTilesMeetApart) {
  auto check = [](int tiles, int stages, int blocks) {
    const PackedStreamSplit split{.stages = stages, .units = tiles * stages,
                                  .warps = blocks * kPackedStreamWarps};
    std::set<int> counters;
    std::set<std::pair<int, int>> records;
    for (int tile = 0; tile < tiles; ++tile) {
      const int first = split.WarpOf(tile * stages);
      const int last = split.WarpOf((tile + 1) * stages - 1);
      if (first == last) continue;  // stored whole, no meeting
      ASSERT_TRUE(counters.insert(first).second)
          << tiles << " x " << stages << " over " << blocks << " blocks: tile " << tile;
      for (int owner = first; owner <= last; ++owner) {
        if (split.Start(owner) == split.Start(owner + 1)) continue;
        const int slot = split.Start(owner) / stages == tile ? 0 : 1;
        ASSERT_TRUE(records.insert({owner, slot}).second)
            << tiles << " x " << stages << ": warp " << owner << " slot " << slot;
      }
    }
  };
  for (int tiles : {1, 2, 3, 7, 33}) {
    for (int stages : {1, 2, 5, 18, 40}) {
      for (int cap : {1, 2, 3, 5, 64}) {
        for (auto grid : {PackedStreamGrid::kBlockPerTileWhenTilesFit,
                          PackedStreamGrid::kEveryResidentBlock}) {
          check(tiles, stages, PackedStreamBlocks(tiles, stages, cap, grid));
        }
      }
    }
  }
}

TEST_P(PackedLinearKernelTest, DispatchPicksAPathForEveryM) {
  std::mt19937 rng(2007);
  for (int m : {1, 2, 5, 8, 9, 16, 17}) {
    CheckLinear<__nv_bfloat16>(GetParam(), Path::kDispatch, PackedScheme::kQ4_K, m, 72, 256, rng);
    CheckLinear<__half>(GetParam(), Path::kDispatch, PackedScheme::kNvfp4, m, 8, 128, rng);
  }
}

template <typename T>
uint16_t HostBits(T value) {
  uint16_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// packed_dequantize.cuh: every weight DequantizePacked's f32 value rounded once to T, bit for bit
// (out poisoned with NaN first, so an unwritten element fails).
template <typename T>
void CheckDequantize(const simt::Schedule& schedule, PackedScheme scheme, int n, int k,
                     std::mt19937& rng, bool tiny_scales = false) {
  const PackedWeight weight = RandomWeight(scheme, n, k, rng, tiny_scales);
  const std::vector<float> w = DequantizePacked(weight);
  const DevicePackedWeight d_w(weight);
  DeviceBuffer<T> d_out(size_t(n) * k);
  for (size_t i = 0; i < d_out.size(); ++i)
    d_out[i] = simt::FloatTo<T>(std::numeric_limits<float>::quiet_NaN());
  simt::TestLauncher launcher(schedule);
  const auto status = LaunchPackedDequantize(launcher, d_w.view, d_out.get());
  ASSERT_TRUE(status.ok()) << status;
  for (size_t i = 0; i < w.size(); ++i) {
    const T expected = simt::FloatTo<T>(w[i]);
    ASSERT_EQ(HostBits(d_out[i]), HostBits(expected))
        << "scheme " << int(scheme) << " [" << n << ", " << k << "] element " << i << ": "
        << simt::AsFloat(d_out[i]) << " vs " << w[i];
  }
}

TEST_P(PackedLinearKernelTest, DequantizeIsTheReferenceRoundedOnce) {
  std::mt19937 rng(2010);
  for (int s = 0; s <= static_cast<int>(PackedScheme::kMxfp4); ++s) {
    const auto scheme = static_cast<PackedScheme>(s);
    const int k = scheme == PackedScheme::kQ4_K ? 512 : 320;
    CheckDequantize<__nv_bfloat16>(GetParam(), scheme, 24, k, rng);
    CheckDequantize<__half>(GetParam(), scheme, 8, k, rng);
  }
  CheckDequantize<__half>(GetParam(), PackedScheme::kNvfp4, 16, 256, rng, true);
}

// A bad shape is refused by the launch (named *LaunchError*: the GPU kit's sanitizer run leaves
// out the tests that fail a launch on purpose).
TEST_P(PackedLinearKernelTest, DequantizeOfABadShapeIsALaunchError) {
  std::mt19937 rng(2011);
  DeviceBuffer<__half> out(64 * 96);
  const PackedWeight weight = RandomWeight(PackedScheme::kQ8_0, 8, 64, rng);
  DevicePackedWeight d_w(weight);
  d_w.view.k = 96;  // k % 64
  simt::TestLauncher launcher(GetParam());
  EXPECT_FALSE(LaunchPackedDequantize(launcher, d_w.view, out.get()).ok());
}

TEST_P(PackedLinearKernelTest, UnsupportedShapesAreALaunchError) {
  std::mt19937 rng(2008);
  const PackedWeight weight = RandomWeight(PackedScheme::kQ4_K, 16, 256, rng);
  const DevicePackedWeight d_w(weight);
  DeviceBuffer<__nv_bfloat16> d_x(32 * 256 + 8), d_y(32 * 16 + 8);
  const __nv_bfloat16* x = d_x.get();
  simt::TestLauncher launcher(GetParam());
  EXPECT_TRUE(Launch(launcher, Path::kDispatch, x, 2, d_w.view, d_y.get()).ok());
  auto rejected = [&](Path path, const __nv_bfloat16* xx, int m, PackedLinear w, __nv_bfloat16* y) {
    return !Launch(launcher, path, xx, m, w, y).ok();
  };
  PackedLinear w = d_w.view;
  EXPECT_TRUE(rejected(Path::kDispatch, x, 0, w, d_y.get()));      // m < 1
  EXPECT_TRUE(rejected(Path::kDispatch, x + 1, 2, w, d_y.get()));  // x misaligned
  EXPECT_TRUE(rejected(Path::kDispatch, x, 2, w, d_y.get() + 1));  // y misaligned
  EXPECT_TRUE(rejected(Path::kSmallM, x, 9, w, d_y.get()));        // small-m path, m > 8
  EXPECT_TRUE(rejected(Path::kTc, x, 17, w, d_y.get()));           // tensor-core decode, m > 16
  EXPECT_TRUE(rejected(Path::kStream, x, 5, w, d_y.get()));        // streaming path, m > 4
  EXPECT_FALSE(Launch(launcher, Path::kStream, x, 1, w, d_y.get(), PackedStreamWorkspace{}).ok());
  {
    PackedLinear q4 = w;
    q4.scheme = PackedScheme::kQ4_0, q4.k = 192, q4.mins = nullptr, q4.super_scales = nullptr;
    EXPECT_TRUE(rejected(Path::kStream, x, 1, q4, d_y.get()));  // streaming path, k % 128
  }
  w.k = 192;
  EXPECT_TRUE(rejected(Path::kDispatch, x, 2, w, d_y.get()));  // Q4_K, k % 256
  w.k = 256, w.n = 12;
  EXPECT_TRUE(rejected(Path::kMma, x, 32, w, d_y.get()));  // n % 8
  w.n = 16, w.mins = nullptr;
  EXPECT_TRUE(rejected(Path::kDispatch, x, 2, w, d_y.get()));  // Q4_K without mins
  w = d_w.view, w.scheme = PackedScheme::kQ4_0, w.k = 96;
  EXPECT_TRUE(rejected(Path::kDispatch, x, 2, w, d_y.get()));  // k % 64
  w.scheme = static_cast<PackedScheme>(42), w.k = 256;
  EXPECT_TRUE(rejected(Path::kDispatch, x, 2, w, d_y.get()));  // no such scheme
}

INSTANTIATE_TEST_SUITE_P(Schedules, PackedLinearKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
