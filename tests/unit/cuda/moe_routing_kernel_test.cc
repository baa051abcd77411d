// MoE routing on the device (moe_routing.cuh) against kernels/cpu/moe_routing.h, under every
// test schedule, on fresh random logits and awkward sizes (E in {7, 60, 256, 512}, k in {1, 2, 8,
// 16}, n in {1, 3, 37}):
//   - bit for bit: the softmax written back to the logits, the expert ids and the weights equal
//     RouteTokens with Isa::kAvx2 (= kAvx512; the device mirrors that arithmetic), with and
//     without renormalisation, also on logits full of exact ties (ties to the lower index);
//   - the grouping equals GroupByExpert exactly (offsets, row_tokens, slot_rows), including
//     experts with empty groups and n * k = 4800 slots (several 32-slot steps per warp), and the
//     GEMM tile list covers every grouped row once, in expert order, -1 past the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cuda/moe_routing.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;
namespace cpu = ::tessera::kernels::cpu;

struct RoutingCase {
  int num_experts;
  int k;
};

const RoutingCase kCases[] = {{7, 1}, {7, 2}, {60, 1}, {60, 8}, {256, 8}, {512, 16}, {7, 7}};

struct DeviceRouting {
  std::vector<float> probs;  // the logits after the launch
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

DeviceRouting RouteOnDevice(const simt::Schedule& schedule, const std::vector<float>& logits,
                            int n, int num_experts, int k, bool normalize) {
  DeviceBuffer<float> d_logits{std::span<const float>(logits)};
  DeviceBuffer<int32_t> d_ids(size_t(n) * k + 1);
  DeviceBuffer<float> d_weights(size_t(n) * k + 1);
  simt::TestLauncher launcher(schedule);
  const auto status = LaunchMoeRoute(launcher, d_logits.get(), n, num_experts, k, normalize,
                                     d_ids.get(), d_weights.get());
  EXPECT_TRUE(status.ok()) << status;
  DeviceRouting out{d_logits.ToHost(), d_ids.ToHost(), d_weights.ToHost()};
  out.ids.resize(size_t(n) * k);
  out.weights.resize(size_t(n) * k);
  return out;
}

// Logits uniform in [-4, 4], or (ties) multiples of 1/2 in [-2, 2]: many exactly equal values.
std::vector<float> RandomLogits(size_t count, bool ties, std::mt19937& rng) {
  std::vector<float> values = simt::RandomFloats(count, rng, -4.0f, 4.0f);
  if (ties) {
    for (float& v : values) v = std::round(v) / 2.0f;
  }
  return values;
}

void CheckRouting(const simt::Schedule& schedule, const RoutingCase& c, int n, bool normalize,
                  bool ties, std::mt19937& rng) {
  const std::vector<float> logits = RandomLogits(size_t(n) * c.num_experts, ties, rng);
  const DeviceRouting got = RouteOnDevice(schedule, logits, n, c.num_experts, c.k, normalize);
  std::vector<float> probs = logits;
  std::vector<int32_t> ids(size_t(n) * c.k);
  std::vector<float> weights(size_t(n) * c.k);
  cpu::RouteTokens({c.num_experts, c.k, normalize}, probs, n, ids, weights, cpu::Isa::kAvx2);
  const std::string where = "E " + std::to_string(c.num_experts) + " k " + std::to_string(c.k) +
                            " n " + std::to_string(n) + (normalize ? " normalized" : "") +
                            (ties ? " ties" : "");
  ASSERT_EQ(std::memcmp(got.probs.data(), probs.data(), probs.size() * sizeof(float)), 0)
      << "softmax bits differ: " << where;
  ASSERT_EQ(got.ids, ids) << where;
  ASSERT_EQ(std::memcmp(got.weights.data(), weights.data(), weights.size() * sizeof(float)), 0)
      << "weight bits differ: " << where;
}

class MoeRoutingKernelTest : public simt::KernelTest {
 protected:
  void SetUp() override {
    if (!cpu::IsaSupported(cpu::Isa::kAvx2)) {
      GTEST_SKIP() << "the device mirrors the kAvx2/kAvx512 softmax; this CPU has neither";
    }
  }
};

TEST_P(MoeRoutingKernelTest, RoutesBitForBitAsTheCpu) {
  std::mt19937 rng(71);
  for (const RoutingCase& c : kCases) {
    for (int n : {1, 3, 37}) {
      for (bool normalize : {true, false}) {
        CheckRouting(GetParam(), c, n, normalize, /*ties=*/false, rng);
      }
    }
  }
}

TEST_P(MoeRoutingKernelTest, TiesGoToTheLowerExpert) {
  std::mt19937 rng(72);
  for (const RoutingCase& c : kCases) CheckRouting(GetParam(), c, 37, true, /*ties=*/true, rng);
}

// k distinct experts per token, uniformly (a routing's shape without the softmax).
std::vector<int32_t> RandomExpertIds(int n, int k, int num_experts, std::mt19937& rng) {
  std::vector<int32_t> all(num_experts), ids;
  for (int e = 0; e < num_experts; ++e) all[e] = e;
  for (int t = 0; t < n; ++t) {
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + k);
  }
  return ids;
}

void CheckGrouping(const simt::Schedule& schedule, int n, int k, int num_experts,
                   std::mt19937& rng) {
  const std::vector<int32_t> ids = RandomExpertIds(n, k, num_experts, rng);
  const int slots = n * k, max_tiles = MoeMaxRowTiles(slots, num_experts);
  DeviceBuffer<int32_t> d_ids{std::span<const int32_t>(ids)};
  DeviceBuffer<int32_t> offsets(num_experts + 1), row_tokens(slots), slot_rows(slots);
  DeviceBuffer<int32_t> tile_expert(max_tiles), tile_row0(max_tiles);
  simt::TestLauncher launcher(schedule);
  const MoeGroupsView view{offsets.get(), row_tokens.get(), slot_rows.get(), tile_expert.get(),
                           tile_row0.get()};
  const auto status = LaunchMoeGroupByExpert(launcher, d_ids.get(), n, k, num_experts, view);
  ASSERT_TRUE(status.ok()) << status;
  cpu::ExpertGroups expected;
  cpu::GroupByExpert(ids, n, k, num_experts, &expected);
  const std::string where = "n " + std::to_string(n) + " k " + std::to_string(k) + " E " +
                            std::to_string(num_experts);
  ASSERT_EQ(offsets.ToHost(), expected.offsets) << where;
  ASSERT_EQ(row_tokens.ToHost(), expected.row_tokens) << where;
  ASSERT_EQ(slot_rows.ToHost(), expected.slot_rows) << where;
  // The tile list: expert by expert, tiles of kMoeTileRows rows from each group's start.
  std::vector<int32_t> want_expert(max_tiles, -1), want_row0(max_tiles, 0);
  int tile = 0;
  for (int e = 0; e < num_experts; ++e) {
    for (int row = expected.offsets[e]; row < expected.offsets[e + 1]; row += kMoeTileRows) {
      ASSERT_LT(tile, max_tiles) << where;
      want_expert[tile] = e;
      want_row0[tile++] = row;
    }
  }
  ASSERT_EQ(tile_expert.ToHost(), want_expert) << where;
  ASSERT_EQ(tile_row0.ToHost(), want_row0) << where;
}

TEST_P(MoeRoutingKernelTest, GroupsAsTheCpuCountingSort) {
  std::mt19937 rng(73);
  for (auto [n, k, e] : {std::tuple{1, 1, 7}, {1, 2, 60}, {3, 2, 7}, {3, 8, 60}, {37, 8, 60},
                         {37, 1, 7}, {37, 16, 512}, {37, 8, 256}, {600, 8, 60}}) {
    CheckGrouping(GetParam(), n, k, e, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, MoeRoutingKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
