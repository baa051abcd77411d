// A whole MoE layer (Qwen3-Next / Qwen3.5-MoE shape) on the device, as the CUDA runner will
// chain it, under every test schedule: router logits (batch_invariant_gemm.cuh, f32 out),
// routing and grouping (moe_routing.cuh), the routed experts and SwiGLU (moe_grouped_gemm.cuh),
// the dense shared expert and its gate logit (batch-invariant GEMMs + activations.cuh), the
// combine. Against kernels/cpu/moe_reference.h's f64 MoeFfn on the same weights (the T-rounded
// values), f32 and bf16, n in {1, 3, 37}, E in {7, 60}, k in {1, 2, 8}, awkward widths:
//   - experts: the device's ids equal the f64 reference's wherever the reference's probability
//     gap between rank k-1 and rank k exceeds 1e-5 (below that f32 and f64 may order them
//     differently; such tokens are not compared, and there must be few);
//   - outputs: f32 within 2e-4 (1 + |x|); bf16 within 0.03 + 0.03 |x| (gate, up, SwiGLU,
//     shared expert and output each rounded to bf16);
//   - batch invariance: tokens 0, 17 and 36 of a batch of 37 give the same output bits when
//     run alone (n = 1), and rows 1..2 of a batch of 3 give the bits of the batch of 37.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cpu/moe_reference.h"
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/batch_invariant_gemm.cuh"
#include "kernels/cuda/moe_grouped_gemm.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;
namespace cpu = ::tessera::kernels::cpu;

struct LayerShape {
  int num_experts, k, hidden, ffn, shared_ffn;
};

// Weights as f32 values exactly representable in T (the reference reads the same numbers).
struct LayerWeights {
  LayerShape s;
  std::vector<float> router, gate, up, down, shared_gate, shared_up, shared_down, shared_logit;
};

template <typename T>
std::vector<float> RoundedTo(std::vector<float> values) {
  for (float& v : values) v = simt::AsFloat(simt::FloatTo<T>(v));
  return values;
}

template <typename T>
LayerWeights MakeWeights(const LayerShape& s, std::mt19937& rng) {
  const auto random = [&](size_t count, int cols, float gain) {
    const float bound = gain * std::sqrt(3.0f / float(cols));
    return RoundedTo<T>(simt::RandomFloats(count, rng, -bound, bound));
  };
  const size_t e = s.num_experts;
  return {s,
          random(e * s.hidden, s.hidden, 3.0f),
          random(e * s.ffn * s.hidden, s.hidden, 1.0f),
          random(e * s.ffn * s.hidden, s.hidden, 1.0f),
          random(e * s.hidden * s.ffn, s.ffn, 1.0f),
          random(size_t(s.shared_ffn) * s.hidden, s.hidden, 1.0f),
          random(size_t(s.shared_ffn) * s.hidden, s.hidden, 1.0f),
          random(size_t(s.hidden) * s.shared_ffn, s.shared_ffn, 1.0f),
          random(s.hidden, s.hidden, 2.0f)};
}

template <typename T>
struct DeviceLayer {
  explicit DeviceLayer(const LayerWeights& w)
      : router(Convert(w.router)), gate(Convert(w.gate)), up(Convert(w.up)),
        down(Convert(w.down)), shared_gate(Convert(w.shared_gate)),
        shared_up(Convert(w.shared_up)), shared_down(Convert(w.shared_down)),
        shared_logit(Convert(w.shared_logit)) {}
  static std::vector<T> Convert(const std::vector<float>& v) { return simt::Convert<T>(v); }
  DeviceBuffer<T> router, gate, up, down, shared_gate, shared_up, shared_down, shared_logit;
};

// Every launch of the layer, in the runner's order; returns out [n, hidden] of T and the ids.
template <typename T>
std::pair<std::vector<T>, std::vector<int32_t>> RunLayer(const simt::Schedule& schedule,
                                                         const LayerShape& s,
                                                         DeviceLayer<T>& w,
                                                         const std::vector<T>& x, int n) {
  const int slots = n * s.k, tiles = MoeMaxRowTiles(slots, s.num_experts);
  DeviceBuffer<T> d_x{std::span<const T>(x)};
  DeviceBuffer<float> logits(size_t(n) * s.num_experts), weights(slots), gate_logit(n), y(
      size_t(slots) * s.hidden);
  DeviceBuffer<int32_t> ids(slots), offsets(s.num_experts + 1), row_tokens(slots),
      slot_rows(slots), tile_expert(tiles), tile_row0(tiles);
  DeviceBuffer<T> gate(size_t(slots) * s.ffn), up(size_t(slots) * s.ffn),
      shared_gate(size_t(n) * s.shared_ffn), shared_up(size_t(n) * s.shared_ffn),
      shared(size_t(n) * s.hidden), out(size_t(n) * s.hidden);
  simt::TestLauncher launcher(schedule);
  const T* xp = d_x.get();
  const auto check = [](const auto& status) { EXPECT_TRUE(status.ok()) << status; };
  check(LaunchBatchInvariantGemm(launcher, xp, w.router.get(), logits.get(), n, s.num_experts,
                                 s.hidden));
  check(LaunchMoeRouting(launcher, logits.get(), n, s.num_experts, s.k, true, ids.get(),
                         weights.get(),
                         MoeGroupsView{offsets.get(), row_tokens.get(), slot_rows.get(),
                                       tile_expert.get(), tile_row0.get()}));
  MoeExpertsArgs<T, float> args{.x = xp,
                                .gate_w = {.dense = w.gate.get()},
                                .up_w = {.dense = w.up.get()},
                                .down_w = {.dense = w.down.get()},
                                .gate = gate.get(),
                                .up = up.get(),
                                .y = y.get(),
                                .num_tokens = n,
                                .k = s.k,
                                .num_experts = s.num_experts,
                                .hidden = s.hidden,
                                .ffn = s.ffn};
  check(LaunchMoeExperts(launcher,
                         MoeGemmGroups{offsets.get(), row_tokens.get(), tile_expert.get(),
                                       tile_row0.get()},
                         args));
  check(LaunchBatchInvariantGemm(launcher, xp, w.shared_gate.get(), shared_gate.get(), n,
                                 s.shared_ffn, s.hidden));
  check(LaunchBatchInvariantGemm(launcher, xp, w.shared_up.get(), shared_up.get(), n,
                                 s.shared_ffn, s.hidden));
  check(LaunchSwiGlu(launcher, static_cast<const T*>(shared_gate.get()),
                     static_cast<const T*>(shared_up.get()), shared_gate.get(), n, s.shared_ffn));
  check(LaunchBatchInvariantGemm(launcher, static_cast<const T*>(shared_gate.get()),
                                 w.shared_down.get(), shared.get(), n, s.hidden, s.shared_ffn));
  check(LaunchBatchInvariantGemm(launcher, xp, w.shared_logit.get(), gate_logit.get(), n, 1,
                                 s.hidden));
  check(LaunchMoeCombine(launcher, static_cast<const float*>(y.get()),
                         static_cast<const float*>(weights.get()),
                         static_cast<const int32_t*>(slot_rows.get()),
                         static_cast<const T*>(shared.get()),
                         static_cast<const float*>(gate_logit.get()), out.get(), n, s.k,
                         s.hidden));
  return {out.ToHost(), ids.ToHost()};
}

// The f64 reference's output and routing for x (as f32 values).
void Reference(const LayerWeights& w, const std::vector<float>& x, int n, std::vector<float>* out,
               std::vector<int32_t>* ids) {
  const LayerShape& s = w.s;
  using cpu::WeightFormat;
  cpu::MoeFfnConfig config;
  config.routing = {s.num_experts, s.k, true};
  cpu::MoeFfnWeights v;
  v.router = {WeightFormat::kF32, w.router.data(), s.num_experts, s.hidden};
  v.gate = {WeightFormat::kF32, w.gate.data(), s.num_experts, s.ffn, s.hidden};
  v.up = {WeightFormat::kF32, w.up.data(), s.num_experts, s.ffn, s.hidden};
  v.down = {WeightFormat::kF32, w.down.data(), s.num_experts, s.hidden, s.ffn};
  v.shared_gate = {WeightFormat::kF32, w.shared_gate.data(), s.shared_ffn, s.hidden};
  v.shared_up = {WeightFormat::kF32, w.shared_up.data(), s.shared_ffn, s.hidden};
  v.shared_down = {WeightFormat::kF32, w.shared_down.data(), s.hidden, s.shared_ffn};
  v.shared_expert_gate = {WeightFormat::kF32, w.shared_logit.data(), 1, s.hidden};
  out->assign(size_t(n) * s.hidden, 0.0f);
  cpu::reference::MoeFfn(config, v, x, n, *out, ids);
}

// The f64 probability gap between the reference's rank k-1 and rank k experts of token t.
double TopKGap(const LayerWeights& w, const std::vector<float>& x, int t) {
  const LayerShape& s = w.s;
  std::vector<double> logits(s.num_experts);
  for (int e = 0; e < s.num_experts; ++e) {
    for (int i = 0; i < s.hidden; ++i) {
      logits[e] += double(x[size_t(t) * s.hidden + i]) * w.router[size_t(e) * s.hidden + i];
    }
  }
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double& l : logits) sum += (l = std::exp(l - max));
  std::sort(logits.begin(), logits.end(), std::greater<>());
  if (s.k == s.num_experts) return 1.0;
  return (logits[s.k - 1] - logits[s.k]) / sum;
}

template <typename T>
void CheckLayer(const simt::Schedule& schedule, const LayerShape& s, int n, std::mt19937& rng) {
  const LayerWeights w = MakeWeights<T>(s, rng);
  DeviceLayer<T> device(w);
  const std::vector<float> x = RoundedTo<T>(simt::RandomFloats(size_t(n) * s.hidden, rng, -1, 1));
  const auto [out, ids] = RunLayer<T>(schedule, s, device, simt::Convert<T>(x), n);
  std::vector<float> expected;
  std::vector<int32_t> expected_ids;
  Reference(w, x, n, &expected, &expected_ids);
  const double tolerance = sizeof(T) == 4 ? 2e-4 : 0.03;
  int near_ties = 0;
  for (int t = 0; t < n; ++t) {
    if (TopKGap(w, x, t) <= 1e-5) {
      ++near_ties;
      continue;
    }
    for (int r = 0; r < s.k; ++r) {
      ASSERT_EQ(ids[size_t(t) * s.k + r], expected_ids[size_t(t) * s.k + r])
          << "token " << t << " rank " << r << " E " << s.num_experts << " n " << n;
    }
    for (int i = 0; i < s.hidden; ++i) {
      const double want = expected[size_t(t) * s.hidden + i];
      ASSERT_NEAR(simt::AsFloat(out[size_t(t) * s.hidden + i]), want,
                  tolerance * (1 + std::fabs(want)))
          << "token " << t << " element " << i << " E " << s.num_experts << " n " << n;
    }
  }
  EXPECT_LE(near_ties, n / 4 + 1) << "too many near ties to say anything";
}

const LayerShape kShapes[] = {{7, 2, 40, 24, 36}, {60, 8, 48, 20, 16}, {7, 1, 33, 17, 9}};

class MoeLayerKernelTest : public simt::KernelTest {};

TEST_P(MoeLayerKernelTest, MatchesTheF64Reference) {
  std::mt19937 rng(91);
  for (const LayerShape& s : kShapes) {
    for (int n : {1, 3, 37}) {
      CheckLayer<float>(GetParam(), s, n, rng);
      CheckLayer<__nv_bfloat16>(GetParam(), s, n, rng);
    }
  }
}

template <typename T>
void CheckBatchInvariance(const simt::Schedule& schedule, const LayerShape& s, std::mt19937& rng) {
  constexpr int kBatch = 37;
  const LayerWeights w = MakeWeights<T>(s, rng);
  DeviceLayer<T> device(w);
  const std::vector<T> x =
      simt::Convert<T>(simt::RandomFloats(size_t(kBatch) * s.hidden, rng, -1, 1));
  const std::vector<T> batched = RunLayer<T>(schedule, s, device, x, kBatch).first;
  const auto rows = [&](const std::vector<T>& from, int first, int count) {
    return std::vector<T>(from.begin() + size_t(first) * s.hidden,
                          from.begin() + size_t(first + count) * s.hidden);
  };
  for (int t : {0, 17, 36}) {
    const std::vector<T> alone = RunLayer<T>(schedule, s, device, rows(x, t, 1), 1).first;
    ASSERT_EQ(std::memcmp(alone.data(), batched.data() + size_t(t) * s.hidden,
                          alone.size() * sizeof(T)),
              0)
        << "token " << t << " alone differs from the batch of 37";
  }
  const std::vector<T> three = RunLayer<T>(schedule, s, device, rows(x, 20, 3), 3).first;
  ASSERT_EQ(std::memcmp(three.data(), batched.data() + size_t(20) * s.hidden,
                        three.size() * sizeof(T)),
            0)
      << "tokens 20..22 as a batch of 3 differ from the batch of 37";
}

TEST_P(MoeLayerKernelTest, TokenBitsDoNotDependOnTheBatch) {
  std::mt19937 rng(92);
  CheckBatchInvariance<float>(GetParam(), kShapes[1], rng);
  CheckBatchInvariance<__nv_bfloat16>(GetParam(), kShapes[0], rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, MoeLayerKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
