// MoE grouped GEMM, combine and the whole routed layer on the device (moe_grouped_gemm.cuh,
// moe_routing.cuh) under every test schedule, on fresh random inputs:
//   - the grouped GEMM is bit for bit the host chain acc = fma(a, w, acc) in k order for every
//     grouped row (gathered token rows or already-grouped rows), f32 and bf16, C in T or f32;
//     16-bit stacks at cols % 8 == 0 (tensor cores): bit for bit the batch-invariant GEMM of the
//     group's rows over the expert's matrix (the same mma chain per element);
//     n in {1, 3, 37}, E in {7, 60} (most experts empty at n = 1), awkward rows_out / cols;
//     every row is written (NaN sentinels);
//   - the combine is bit for bit moe_ffn.cc's Combine (rank order, multiply then add, gate last)
//     with a gated, an ungated and no shared expert (under the emulator; on a GPU expf may move
//     the gate by an ulp, so there a 1e-6 relative tolerance);
//   - packed expert stacks (every scheme, a fused stack's half): the decoded weights' chain times
//     the expert's scale, bit for bit; stacks that do not fit the projection are launch errors;
// The whole layer and its batch invariance: moe_layer_kernel_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/moe_routing.h"
#include "kernels/cuda/batch_invariant_gemm.cuh"
#include "kernels/cuda/moe_grouped_gemm.cuh"
#include "kernels/cuda/packed_weight.h"
#include "tests/unit/cuda/kernel_test_env.h"
#include "tests/unit/cuda/random_packed_weight.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;
using simt::SameBits;
namespace cpu = ::tessera::kernels::cpu;

// k distinct experts per token, uniformly.
std::vector<int32_t> RandomExpertIds(int n, int k, int num_experts, std::mt19937& rng) {
  if (k > num_experts) {  // the routing's precondition: k distinct experts cannot be drawn
    ADD_FAILURE() << "k " << k << " > " << num_experts << " experts";
    k = num_experts;
  }
  std::vector<int32_t> all(num_experts), ids;
  for (int e = 0; e < num_experts; ++e) all[e] = e;
  for (int t = 0; t < n; ++t) {
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + k);
  }
  return ids;
}

// The grouping of expert_ids on the device (moe_routing_kernel_test checks it against the CPU).
struct DeviceGroups {
  DeviceGroups(const simt::Schedule& schedule, const int32_t* device_ids, int n, int k, int e)
      : offsets(e + 1), row_tokens(size_t(n) * k), slot_rows(size_t(n) * k),
        tile_expert(MoeMaxRowTiles(n * k, e) + 1), tile_row0(MoeMaxRowTiles(n * k, e) + 1) {
    simt::TestLauncher launcher(schedule);
    const auto status = LaunchMoeGroupByExpert(
        launcher, device_ids, n, k, e,
        MoeGroupsView{offsets.get(), row_tokens.get(), slot_rows.get(), tile_expert.get(),
                      tile_row0.get()});
    EXPECT_TRUE(status.ok()) << status;
  }
  MoeGemmGroups View(bool gather) const {
    return {offsets.get(), gather ? row_tokens.get() : nullptr, tile_expert.get(),
            tile_row0.get()};
  }
  DeviceBuffer<int32_t> offsets, row_tokens, slot_rows, tile_expert, tile_row0;
};

template <typename T, typename TC>
void CheckGroupedGemm(const simt::Schedule& schedule, int n, int k, int num_experts, int rows_out,
                      int cols, bool gather, std::mt19937& rng) {
  const std::vector<int32_t> ids = RandomExpertIds(n, k, num_experts, rng);
  DeviceBuffer<int32_t> d_ids{std::span<const int32_t>(ids)};
  const DeviceGroups groups(schedule, d_ids.get(), n, k, num_experts);
  const int slots = n * k, a_rows = gather ? n : slots;
  const std::vector<T> a = simt::Convert<T>(simt::RandomFloats(size_t(a_rows) * cols, rng, -2, 2));
  const std::vector<T> w =
      simt::Convert<T>(simt::RandomFloats(size_t(num_experts) * rows_out * cols, rng));
  DeviceBuffer<T> d_a{std::span<const T>(a)}, d_w{std::span<const T>(w)};
  DeviceBuffer<TC> d_c(size_t(slots) * rows_out);
  for (size_t i = 0; i < d_c.size(); ++i) {
    d_c[i] = simt::FloatTo<TC>(std::numeric_limits<float>::quiet_NaN());
  }
  simt::TestLauncher launcher(schedule);
  const ExpertStack<T> stack{.dense = static_cast<const T*>(d_w.get())};
  const auto status = LaunchMoeGroupedGemm(launcher, static_cast<const T*>(d_a.get()), stack,
                                           d_c.get(), groups.View(gather), slots, num_experts,
                                           rows_out, cols);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<int32_t> offsets = groups.offsets.ToHost();
  const std::vector<int32_t> row_tokens = groups.row_tokens.ToHost();
  const bool tensor_cores = InvariantTcTakes<T>(cols);
  for (int e = 0; e < num_experts; ++e) {
    if (offsets[e + 1] == offsets[e]) continue;
    std::vector<T> rows;  // the group's A rows, for the tensor-core path's check
    for (int row = offsets[e]; row < offsets[e + 1]; ++row) {
      const size_t a_row = gather ? row_tokens[row] : row;
      rows.insert(rows.end(), a.begin() + a_row * cols, a.begin() + (a_row + 1) * cols);
      for (int j = 0; j < rows_out && !tensor_cores; ++j) {
        float acc = 0.0f;
        for (int i = 0; i < cols; ++i) {
          acc = std::fma(simt::AsFloat(a[a_row * cols + i]),
                         simt::AsFloat(w[(size_t(e) * rows_out + j) * cols + i]), acc);
        }
        ASSERT_TRUE(SameBits(d_c[size_t(row) * rows_out + j], simt::FloatTo<TC>(acc)))
            << "n " << n << " k " << k << " E " << num_experts << " expert " << e << " row "
            << row << " col " << j << (gather ? " gathered" : "");
      }
    }
    if (!tensor_cores) continue;
    // Tensor cores: the group's rows are the batch-invariant GEMM's over the expert's matrix,
    // bit for bit (the same mma chain per element), whatever the group's size.
    const int count = offsets[e + 1] - offsets[e];
    DeviceBuffer<T> d_rows{std::span<const T>(rows)};
    DeviceBuffer<TC> d_want(size_t(count) * rows_out);
    const auto dense = LaunchBatchInvariantGemm(
        launcher, static_cast<const T*>(d_rows.get()),
        static_cast<const T*>(d_w.get()) + size_t(e) * rows_out * cols, d_want.get(), count,
        rows_out, cols);
    ASSERT_TRUE(dense.ok()) << dense;
    for (int r = 0; r < count; ++r) {
      for (int j = 0; j < rows_out; ++j) {
        ASSERT_TRUE(SameBits(d_c[size_t(offsets[e] + r) * rows_out + j],
                             d_want[size_t(r) * rows_out + j]))
            << "tensor cores: n " << n << " k " << k << " E " << num_experts << " expert " << e
            << " row " << offsets[e] + r << " col " << j << (gather ? " gathered" : "");
      }
    }
  }
}

class MoeGroupedGemmKernelTest : public simt::KernelTest {};

TEST_P(MoeGroupedGemmKernelTest, GroupedGemmIsTheKOrderedFmaChain) {
  std::mt19937 rng(81);
  for (auto [n, k, e, rows_out, cols] : {std::tuple{1, 1, 7, 33, 17}, {1, 2, 60, 129, 40},
                                         {3, 2, 7, 130, 33}, {37, 8, 60, 70, 33},
                                         {37, 1, 7, 9, 1}}) {
    for (bool gather : {true, false}) {
      CheckGroupedGemm<float, float>(GetParam(), n, k, e, rows_out, cols, gather, rng);
      CheckGroupedGemm<__nv_bfloat16, __nv_bfloat16>(GetParam(), n, k, e, rows_out, cols, gather,
                                                     rng);
    }
  }
  CheckGroupedGemm<__nv_bfloat16, float>(GetParam(), 37, 8, 60, 70, 33, true, rng);
  CheckGroupedGemm<__half, __half>(GetParam(), 3, 2, 7, 130, 33, true, rng);
  // Tensor cores (16-bit, cols % 8 == 0): groups of 1 to > 8 rows (several row tiles), cols
  // neither a k16 step nor a k tile, rows_out not a tile.
  CheckGroupedGemm<__nv_bfloat16, float>(GetParam(), 37, 8, 60, 70, 136, true, rng);
  CheckGroupedGemm<__half, __half>(GetParam(), 5, 2, 7, 33, 24, false, rng);
}

// A packed stack of num_experts matrices of expert_rows rows, viewed from first_row for
// rows_out rows: the tile holds DequantizePacked's f32 weights exactly, and each expert's
// products are multiplied once by its scale (per-expert scales, or the stack's tensor scale):
// bit for bit the host chain times s_e.
template <typename T, typename TC>
void CheckPackedGroupedGemm(const simt::Schedule& schedule, PackedScheme scheme, int n, int k,
                            int num_experts, int rows_out, int cols, int expert_rows,
                            int first_row, bool per_expert_scales, std::mt19937& rng) {
  const std::vector<int32_t> ids = RandomExpertIds(n, k, num_experts, rng);
  DeviceBuffer<int32_t> d_ids{std::span<const int32_t>(ids)};
  const DeviceGroups groups(schedule, d_ids.get(), n, k, num_experts);
  const int slots = n * k;
  const std::vector<T> a = simt::Convert<T>(simt::RandomFloats(size_t(n) * cols, rng, -2, 2));
  PackedWeight weight = RandomWeight(scheme, num_experts * expert_rows, cols, rng);
  std::vector<float> scales(num_experts);
  for (float& s : scales) s = std::uniform_real_distribution<float>(0.25f, 3.0f)(rng);
  const float tensor_scale = per_expert_scales ? 1.0f : weight.tensor_scale;
  weight.tensor_scale = 1.0f;  // the weights alone, for the reference
  const std::vector<float> w = DequantizePacked(weight);
  weight.tensor_scale = tensor_scale;
  const DevicePackedWeight d_w(weight);
  DeviceBuffer<float> d_scales{std::span<const float>(scales)};
  const ExpertStack<T> stack{.packed = true,
                             .packed_view = {.stack = d_w.view,
                                             .expert_rows = expert_rows,
                                             .first_row = first_row,
                                             .expert_scales =
                                                 per_expert_scales ? d_scales.get() : nullptr}};
  DeviceBuffer<T> d_a{std::span<const T>(a)};
  DeviceBuffer<TC> d_c(size_t(slots) * rows_out);
  for (size_t i = 0; i < d_c.size(); ++i) {
    d_c[i] = simt::FloatTo<TC>(std::numeric_limits<float>::quiet_NaN());
  }
  simt::TestLauncher launcher(schedule);
  const auto status = LaunchMoeGroupedGemm(launcher, static_cast<const T*>(d_a.get()), stack,
                                           d_c.get(), groups.View(true), slots, num_experts,
                                           rows_out, cols);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<int32_t> offsets = groups.offsets.ToHost();
  const std::vector<int32_t> row_tokens = groups.row_tokens.ToHost();
  for (int e = 0; e < num_experts; ++e) {
    const float s = per_expert_scales ? scales[e] : tensor_scale;
    for (int row = offsets[e]; row < offsets[e + 1]; ++row) {
      for (int j = 0; j < rows_out; ++j) {
        const size_t w_row = size_t(e) * expert_rows + first_row + j;
        float acc = 0.0f;
        for (int i = 0; i < cols; ++i) {
          acc = std::fma(simt::AsFloat(a[size_t(row_tokens[row]) * cols + i]), w[w_row * cols + i],
                         acc);
        }
        const float expected = acc * s;
        ASSERT_TRUE(SameBits(d_c[size_t(row) * rows_out + j], simt::FloatTo<TC>(expected)))
            << PackedSchemeName(scheme) << " n " << n << " E " << num_experts << " expert " << e
            << " row " << row << " col " << j;
      }
    }
  }
}

TEST_P(MoeGroupedGemmKernelTest, PackedStacksAreTheDecodedChainTimesTheExpertScale) {
  std::mt19937 rng(82);
  for (PackedScheme scheme : {PackedScheme::kQ8_0, PackedScheme::kQ4_0, PackedScheme::kQ4_1,
                              PackedScheme::kNvfp4, PackedScheme::kMxfp4}) {
    // A whole stack, and the up half of a fused gate_up stack (rows 24..47 of 48 per expert).
    CheckPackedGroupedGemm<__nv_bfloat16, float>(GetParam(), scheme, 3, 2, 7, 16, 64, 16, 0,
                                                 true, rng);
    CheckPackedGroupedGemm<__nv_bfloat16, __nv_bfloat16>(GetParam(), scheme, 5, 2, 5, 24, 128,
                                                         48, 24, false, rng);
  }
  CheckPackedGroupedGemm<__half, float>(GetParam(), PackedScheme::kQ4_K, 2, 2, 3, 8, 256, 8, 0,
                                        true, rng);
}

TEST_P(MoeGroupedGemmKernelTest, PackedStacksThatDoNotFitAreALaunchError) {
  std::mt19937 rng(83);
  const PackedWeight weight = RandomWeight(PackedScheme::kQ4_0, 4 * 16, 64, rng);
  const DevicePackedWeight d_w(weight);
  const std::vector<int32_t> ids = RandomExpertIds(2, 1, 4, rng);
  DeviceBuffer<int32_t> d_ids{std::span<const int32_t>(ids)};
  const DeviceGroups groups(GetParam(), d_ids.get(), 2, 1, 4);
  DeviceBuffer<float> d_a(2 * 64), d_c(2 * 16);
  simt::TestLauncher launcher(GetParam());
  for (auto [experts, expert_rows, first_row, rows_out, cols] :
       {std::tuple{4, 16, 8, 16, 64}, {4, 8, 0, 8, 64}, {4, 16, 0, 16, 128}}) {
    const ExpertStack<float> stack{
        .packed = true, .packed_view = {.stack = d_w.view, .expert_rows = expert_rows, .first_row = first_row}};
    EXPECT_FALSE(LaunchMoeGroupedGemm(launcher, static_cast<const float*>(d_a.get()), stack,
                                      d_c.get(), groups.View(true), 2, experts, rows_out, cols)
                     .ok())
        << expert_rows << " " << first_row << " " << cols;
  }
}

// moe_ffn.cc's Combine on the host (f32, -ffp-contract=off: products rounded before the adds).
std::vector<float> HostCombine(const std::vector<float>& y, const std::vector<float>& weights,
                               const std::vector<int32_t>& slot_rows,
                               const std::vector<float>* shared, const std::vector<float>* logits,
                               int n, int k, int hidden) {
  std::vector<float> out(size_t(n) * hidden);
  for (int t = 0; t < n; ++t) {
    float* o = out.data() + size_t(t) * hidden;
    const float* row = y.data() + size_t(slot_rows[t * k]) * hidden;
    for (int i = 0; i < hidden; ++i) o[i] = weights[t * k] * row[i];
    for (int r = 1; r < k; ++r) {
      row = y.data() + size_t(slot_rows[t * k + r]) * hidden;
      for (int i = 0; i < hidden; ++i) o[i] += weights[t * k + r] * row[i];
    }
    if (shared == nullptr) continue;
    const float gate = logits ? 1.0f / (1.0f + std::exp(-(*logits)[t])) : 1.0f;
    for (int i = 0; i < hidden; ++i) o[i] += gate * (*shared)[size_t(t) * hidden + i];
  }
  return out;
}

template <typename T>
void CheckCombine(const simt::Schedule& schedule, int n, int k, int num_experts, int hidden,
                  bool with_shared, bool with_gate, std::mt19937& rng) {
  const std::vector<int32_t> ids = RandomExpertIds(n, k, num_experts, rng);
  cpu::ExpertGroups groups;
  cpu::GroupByExpert(ids, n, k, num_experts, &groups);
  const std::vector<float> y = simt::RandomFloats(size_t(n) * k * hidden, rng, -2, 2);
  const std::vector<float> weights = simt::RandomFloats(size_t(n) * k, rng, 0, 1);
  const std::vector<T> shared_t = simt::Convert<T>(simt::RandomFloats(size_t(n) * hidden, rng));
  const std::vector<float> shared = simt::ToFloats<T>(shared_t);
  const std::vector<float> logits = simt::RandomFloats(n, rng, -4, 4);
  DeviceBuffer<float> d_y{std::span<const float>(y)}, d_w{std::span<const float>(weights)};
  DeviceBuffer<float> d_logits{std::span<const float>(logits)};
  DeviceBuffer<int32_t> d_rows{std::span<const int32_t>(groups.slot_rows)};
  DeviceBuffer<T> d_shared{std::span<const T>(shared_t)}, d_out(size_t(n) * hidden);
  simt::TestLauncher launcher(schedule);
  const auto status = LaunchMoeCombine(
      launcher, static_cast<const float*>(d_y.get()), static_cast<const float*>(d_w.get()),
      static_cast<const int32_t*>(d_rows.get()),
      with_shared ? static_cast<const T*>(d_shared.get()) : nullptr,
      with_gate ? static_cast<const float*>(d_logits.get()) : nullptr, d_out.get(), n, k, hidden);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<float> expected =
      HostCombine(y, weights, groups.slot_rows, with_shared ? &shared : nullptr,
                  with_gate ? &logits : nullptr, n, k, hidden);
  for (size_t i = 0; i < expected.size(); ++i) {
#if TESSERA_KERNEL_TEST_ON_GPU
    const double rounding = sizeof(T) < 4 ? 1.0 / 128 : 0.0;  // the one rounding to T
    ASSERT_NEAR(simt::AsFloat(d_out[i]), expected[i],
                (1e-6 + rounding) * (1 + std::fabs(expected[i])));
#else
    ASSERT_TRUE(SameBits(d_out[i], simt::FloatTo<T>(expected[i])))
        << "n " << n << " k " << k << " element " << i << " shared " << with_shared << " gate "
        << with_gate << ": " << simt::AsFloat(d_out[i]) << " vs " << expected[i];
#endif
  }
}

TEST_P(MoeGroupedGemmKernelTest, CombineIsTheCpuOrder) {
  std::mt19937 rng(82);
  for (auto [n, k, e, hidden] : {std::tuple{1, 1, 7, 33}, {3, 2, 7, 300}, {37, 8, 60, 40}}) {
    for (auto [shared, gate] : {std::pair{true, true}, {true, false}, {false, false}}) {
      CheckCombine<float>(GetParam(), n, k, e, hidden, shared, gate, rng);
      CheckCombine<__nv_bfloat16>(GetParam(), n, k, e, hidden, shared, gate, rng);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, MoeGroupedGemmKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
