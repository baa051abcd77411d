// The grouped MoE FFN (kernels/cpu/moe_ffn.h) against the token-by-token f64 reference
// (moe_reference.h) on fresh random weights and awkward sizes, f32 and quantized experts, every
// ISA; and its bit-exact contracts: batch invariance (a token alone == the same token inside a
// batch of 17, any position, pass size and thread count), quantized == dequantized-at-load,
// kAvx2 == kAvx512.
#include "kernels/cpu/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/moe_reference.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::AllNear;
using testing::BitEqual;
using testing::RandomVector;

struct MoeShape {
  WeightFormat format;  // experts and shared expert; router and shared gate are F32 as in GGUFs
  int num_experts;
  int k;
  int64_t hidden;
  int64_t ffn;
  int64_t shared_ffn;  // 0: no shared expert
  bool shared_expert_gate = true;
  bool normalize = true;
};

// A layer's weights, owned. Values uniform in ±sqrt(3 / cols) (variance 1 / cols), so every
// activation stays O(1) whatever the sizes; the router is 3x larger so routing is decisive.
struct OwnedMoe {
  std::vector<std::vector<uint8_t>> buffers;
  MoeFfnConfig config;
  MoeFfnWeights weights;
};

const void* Encode(OwnedMoe* moe, WeightFormat format, int64_t rows, int64_t cols, uint64_t seed,
                   float gain = 1.0f) {
  const float bound = gain * std::sqrt(3.0f / static_cast<float>(cols));
  const std::vector<float> values = RandomVector(rows * cols, seed, -bound, bound);
  auto encoded = gguf::QuantizeFromF32(ToGgmlType(format), values);
  TESSERA_CHECK(encoded.ok(), "test: format has no encoder");
  moe->buffers.push_back(std::move(*encoded));
  return moe->buffers.back().data();
}

OwnedMoe MakeMoe(const MoeShape& s, uint64_t seed) {
  OwnedMoe moe;
  moe.buffers.reserve(8);  // views point into the buffers: no reallocation
  moe.config.routing = {s.num_experts, s.k, s.normalize};
  const int64_t e = s.num_experts;
  MoeFfnWeights& w = moe.weights;
  w.router = {WeightFormat::kF32, Encode(&moe, WeightFormat::kF32, e, s.hidden, seed, 3.0f), e,
              s.hidden};
  w.gate = {s.format, Encode(&moe, s.format, e * s.ffn, s.hidden, seed + 1), e, s.ffn, s.hidden};
  w.up = {s.format, Encode(&moe, s.format, e * s.ffn, s.hidden, seed + 2), e, s.ffn, s.hidden};
  w.down = {s.format, Encode(&moe, s.format, e * s.hidden, s.ffn, seed + 3), e, s.hidden, s.ffn};
  if (s.shared_ffn == 0) return moe;
  const int64_t f = s.shared_ffn;
  w.shared_gate = {s.format, Encode(&moe, s.format, f, s.hidden, seed + 4), f, s.hidden};
  w.shared_up = {s.format, Encode(&moe, s.format, f, s.hidden, seed + 5), f, s.hidden};
  w.shared_down = {s.format, Encode(&moe, s.format, s.hidden, f, seed + 6), s.hidden, f};
  if (s.shared_expert_gate) {
    w.shared_expert_gate = {WeightFormat::kF32,
                            Encode(&moe, WeightFormat::kF32, 1, s.hidden, seed + 7, 2.0f), 1,
                            s.hidden};
  }
  return moe;
}

// Sizes not multiples of the 16 SIMD lanes where the format allows (f32), multiples of the
// 32-element block otherwise (block formats need it along every row).
MoeShape Shape(WeightFormat format, int num_experts, int k) {
  if (format == WeightFormat::kF32) return {format, num_experts, k, 45, 23, 19};
  return {format, num_experts, k, 96, 64, 32};
}

std::string Describe(const MoeShape& s, int64_t num_tokens) {
  return std::string(WeightFormatName(s.format)) + " E=" + std::to_string(s.num_experts) +
         " k=" + std::to_string(s.k) + " T=" + std::to_string(num_tokens);
}

std::vector<float> RunMoe(ThreadPool& pool, const OwnedMoe& moe, const std::vector<float>& x,
                          int64_t num_tokens, Isa isa, MoeFfnWorkspace* ws = nullptr) {
  MoeFfnWorkspace local;
  std::vector<float> out(num_tokens * moe.weights.router.cols, -7.0f);
  MoeFfn(pool, moe.config, moe.weights, x, num_tokens, ws != nullptr ? ws : &local, out, isa);
  return out;
}

class CpuMoeFfnTest : public ::testing::TestWithParam<Isa> {};

// Tolerance against the f64 reference: outputs are O(1) (|ref| up to 2.7 on this grid); each f32
// dot product (23..96 terms) is off by a few 1e-7 and three chained projections plus the weighted
// sums stay below 7.2e-7 (largest error measured over this grid on scalar, avx2 and avx512, both
// routings agreeing). 2e-5 + 1e-4 * |ref| leaves a margin of over 25x, while a wrong expert,
// weight or row (errors of order 0.1) fails loudly.
constexpr double kAbsTol = 2e-5;
constexpr double kRelTol = 1e-4;

TEST_P(CpuMoeFfnTest, MatchesReferenceOnAwkwardSizes) {
  ThreadPool pool(2);
  uint64_t seed = 1000;
  const int expert_counts[][2] = {{4, 1}, {4, 4}, {8, 2}, {8, 8}, {10, 1}, {10, 2}, {10, 8}};
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    for (const auto& [num_experts, k] : expert_counts) {
      const MoeShape shape = Shape(format, num_experts, k);
      const OwnedMoe moe = MakeMoe(shape, seed += 10);
      for (int64_t num_tokens : {1, 3, 17, 97}) {
        const auto x = RandomVector(num_tokens * shape.hidden, ++seed);
        MoeFfnWorkspace ws;
        const std::vector<float> out = RunMoe(pool, moe, x, num_tokens, GetParam(), &ws);
        std::vector<float> ref(out.size());
        std::vector<int32_t> ref_ids;
        reference::MoeFfn(moe.config, moe.weights, x, num_tokens, ref, &ref_ids);
        // One pass (T <= 256): the workspace holds every token's routing.
        ASSERT_TRUE(std::equal(ref_ids.begin(), ref_ids.end(), ws.expert_ids.begin()))
            << Describe(shape, num_tokens);
        ASSERT_TRUE(AllNear(out, ref, kAbsTol, kRelTol)) << Describe(shape, num_tokens);
      }
    }
  }
}

// Unnormalised weights, an ungated shared expert, no shared expert, Q4_1.
TEST_P(CpuMoeFfnTest, VariantsMatchReference) {
  ThreadPool pool(3);
  std::vector<MoeShape> shapes;
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kQ4_1}) {
    MoeShape s = Shape(format, 10, 2);
    s.normalize = false;
    shapes.push_back(s);
    s = Shape(format, 8, 3);
    s.shared_expert_gate = false;
    shapes.push_back(s);
    s = Shape(format, 4, 2);
    s.shared_ffn = 0;
    shapes.push_back(s);
  }
  uint64_t seed = 2000;
  for (const MoeShape& shape : shapes) {
    const OwnedMoe moe = MakeMoe(shape, seed += 10);
    for (int64_t num_tokens : {1, 17}) {
      const auto x = RandomVector(num_tokens * shape.hidden, ++seed);
      const std::vector<float> out = RunMoe(pool, moe, x, num_tokens, GetParam());
      std::vector<float> ref(out.size());
      reference::MoeFfn(moe.config, moe.weights, x, num_tokens, ref);
      ASSERT_TRUE(AllNear(out, ref, kAbsTol, kRelTol)) << Describe(shape, num_tokens);
    }
  }
}

// DESIGN.md §6: token i's output is the same bits alone and inside a batch of 17 other tokens,
// at its first, a middle and the last position, for 1..3 threads and passes of 1, 4 and 256
// tokens (a different grouping every time: other tokens fill the experts' groups around it).
TEST_P(CpuMoeFfnTest, BatchInvariantBitExact) {
  uint64_t seed = 3000;
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kQ4_0}) {
    for (const auto& [num_experts, k] : {std::pair{10, 2}, std::pair{8, 8}, std::pair{4, 1}}) {
      const MoeShape shape = Shape(format, num_experts, k);
      OwnedMoe moe = MakeMoe(shape, seed += 10);
      const auto probe = RandomVector(shape.hidden, ++seed);
      ThreadPool single(1);
      const std::vector<float> alone = RunMoe(single, moe, probe, 1, GetParam());
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (int64_t pass : {1, 4, 256}) {
          moe.config.max_tokens_per_pass = pass;
          for (int64_t position : {0, 8, 16}) {
            auto x = RandomVector(17 * shape.hidden, seed + 100 * position + pass);
            std::copy(probe.begin(), probe.end(), x.begin() + position * shape.hidden);
            const std::vector<float> out = RunMoe(pool, moe, x, 17, GetParam());
            ASSERT_TRUE(BitEqual(
                {out.data() + position * shape.hidden, static_cast<size_t>(shape.hidden)}, alone))
                << Describe(shape, 17) << " threads=" << threads << " pass=" << pass
                << " position=" << position;
          }
        }
      }
    }
  }
}

// A zero router gives every token equal logits: the tie rule sends all of them to experts
// 0..k-1 with weight 1/k, the other experts receive no token (empty groups, no matmul), and the
// result still matches the reference, whose stable sort breaks the ties the same way.
TEST_P(CpuMoeFfnTest, TiedLogitsAndExpertsWithoutTokens) {
  ThreadPool pool(2);
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kQ8_0}) {
    const MoeShape shape = Shape(format, 10, 3);
    OwnedMoe moe = MakeMoe(shape, 4000);
    std::vector<float> zeros(10 * shape.hidden, 0.0f);
    moe.weights.router.data = zeros.data();
    const auto x = RandomVector(17 * shape.hidden, 4001);
    MoeFfnWorkspace ws;
    const std::vector<float> out = RunMoe(pool, moe, x, 17, GetParam(), &ws);
    for (int e = 0; e <= 10; ++e) {
      EXPECT_EQ(ws.groups.offsets[e], std::min(e, 3) * 17) << "expert " << e;
    }
    std::vector<float> ref(out.size());
    reference::MoeFfn(moe.config, moe.weights, x, 17, ref);
    EXPECT_TRUE(AllNear(out, ref, kAbsTol, kRelTol)) << WeightFormatName(format);
  }
}

// Quantized experts give the bits of the same experts dequantized to f32 at load (matmul.h).
TEST_P(CpuMoeFfnTest, QuantizedEqualsDequantizedAtLoad) {
  ThreadPool pool(2);
  const MoeShape shape = Shape(WeightFormat::kQ4_0, 8, 2);
  const OwnedMoe moe = MakeMoe(shape, 5000);
  OwnedMoe dequantized = moe;  // same router and shared gate (f32); experts replaced below
  std::vector<testing::OwnedWeights> copies;
  copies.reserve(6);
  auto as_f32 = [&](ExpertWeightsView* w) {
    copies.push_back(
        testing::DequantizedCopy({w->format, w->data, w->num_experts * w->rows, w->cols}));
    *w = {WeightFormat::kF32, copies.back().view.data, w->num_experts, w->rows, w->cols};
  };
  auto view_as_f32 = [&](WeightView* w) {
    copies.push_back(testing::DequantizedCopy(*w));
    *w = copies.back().view;
  };
  MoeFfnWeights& w = dequantized.weights;
  as_f32(&w.gate);
  as_f32(&w.up);
  as_f32(&w.down);
  view_as_f32(&w.shared_gate);
  view_as_f32(&w.shared_up);
  view_as_f32(&w.shared_down);
  const auto x = RandomVector(17 * shape.hidden, 5001);
  EXPECT_TRUE(
      BitEqual(RunMoe(pool, moe, x, 17, GetParam()), RunMoe(pool, dequantized, x, 17, GetParam())));
}

// An f32 copy of `rows` x `cols` weights with row r multiplied by scale_of_row(r).
template <typename ScaleOfRow>
std::vector<float> ScaledCopy(const void* data, int64_t rows, int64_t cols, ScaleOfRow scale_of_row) {
  const auto* values = static_cast<const float*>(data);
  std::vector<float> out(values, values + rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] *= scale_of_row(r);
  }
  return out;
}

// Output scales (NVFP4's per-tensor and per-expert tensor scales) multiply each product once:
// with powers of two that is exact, so the layer equals the one whose weights were pre-scaled.
TEST_P(CpuMoeFfnTest, OutputScalesEqualPrescaledWeights) {
  ThreadPool pool(2);
  const MoeShape shape = Shape(WeightFormat::kF32, 6, 2);
  OwnedMoe moe = MakeMoe(shape, 6000);
  const std::vector<float> expert_scales = {0.5f, 2.0f, 1.0f, 0.25f, 4.0f, 0.125f};
  std::vector<std::vector<float>> copies;
  copies.reserve(8);
  OwnedMoe prescaled = moe;
  auto scale_experts = [&](ExpertWeightsView* source, ExpertWeightsView* target) {
    copies.push_back(ScaledCopy(source->data, source->num_experts * source->rows, source->cols,
                                [&](int64_t r) { return expert_scales[r / source->rows]; }));
    target->data = copies.back().data();
    source->output_scales = expert_scales.data();
  };
  auto scale_matrix = [&](WeightView* source, float* scale, WeightView* target, float value) {
    copies.push_back(ScaledCopy(source->data, source->rows, source->cols, [&](int64_t) { return value; }));
    target->data = copies.back().data();
    *scale = value;
  };
  MoeFfnWeights& w = moe.weights;
  MoeFfnWeights& p = prescaled.weights;
  scale_experts(&w.gate, &p.gate);
  scale_experts(&w.up, &p.up);
  scale_experts(&w.down, &p.down);
  scale_matrix(&w.router, &w.scales.router, &p.router, 0.5f);
  scale_matrix(&w.shared_gate, &w.scales.shared_gate, &p.shared_gate, 4.0f);
  scale_matrix(&w.shared_up, &w.scales.shared_up, &p.shared_up, 0.25f);
  scale_matrix(&w.shared_down, &w.scales.shared_down, &p.shared_down, 2.0f);
  scale_matrix(&w.shared_expert_gate, &w.scales.shared_expert_gate, &p.shared_expert_gate, 8.0f);
  const auto x = RandomVector(13 * shape.hidden, 6001);
  const std::vector<float> scaled = RunMoe(pool, moe, x, 13, GetParam());
  EXPECT_TRUE(BitEqual(scaled, RunMoe(pool, prescaled, x, 13, GetParam())));
  MoeFfnWeights unscaled = w;  // and the scales do change the output
  unscaled.gate.output_scales = nullptr;
  unscaled.scales = {};
  moe.weights = unscaled;
  EXPECT_FALSE(BitEqual(scaled, RunMoe(pool, moe, x, 13, GetParam())));
}

INSTANTIATE_TEST_SUITE_P(CpuIsas, CpuMoeFfnTest, ::testing::ValuesIn(SupportedIsas()),
                         testing::IsaParamName);

TEST(CpuMoeFfnIsaTest, Avx2AndAvx512AreBitIdentical) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool(2);
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kQ8_0}) {
    const MoeShape shape = Shape(format, 10, 2);
    const OwnedMoe moe = MakeMoe(shape, 6000);
    const auto x = RandomVector(17 * shape.hidden, 6001);
    EXPECT_TRUE(
        BitEqual(RunMoe(pool, moe, x, 17, Isa::kAvx2), RunMoe(pool, moe, x, 17, Isa::kAvx512)))
        << WeightFormatName(format);
  }
}

TEST(CpuMoeFfnEdgeTest, ZeroTokensWriteNothing) {
  ThreadPool pool(2);
  const OwnedMoe moe = MakeMoe(Shape(WeightFormat::kF32, 4, 2), 7000);
  MoeFfnWorkspace ws;
  const std::vector<float> x;
  std::vector<float> out(8, -1.0f);
  MoeFfn(pool, moe.config, moe.weights, x, 0, &ws, out);
  EXPECT_EQ(out, std::vector<float>(8, -1.0f));
}

TEST(CpuMoeFfnDeathTest, RejectsInconsistentShapes) {
  ThreadPool pool(1);
  const MoeShape shape = Shape(WeightFormat::kF32, 4, 2);
  MoeFfnWorkspace ws;
  const auto x = RandomVector(2 * shape.hidden, 1);
  std::vector<float> out(2 * shape.hidden);
  OwnedMoe moe = MakeMoe(shape, 8000);
  moe.weights.down.rows = shape.hidden - 1;
  EXPECT_DEATH(MoeFfn(pool, moe.config, moe.weights, x, 2, &ws, out), "ffn_down_exps");
  moe = MakeMoe(shape, 8000);
  moe.config.routing.num_experts = 5;
  EXPECT_DEATH(MoeFfn(pool, moe.config, moe.weights, x, 2, &ws, out), "ffn_gate_inp");
  moe = MakeMoe(shape, 8000);
  std::vector<float> inout = x;
  EXPECT_DEATH(MoeFfn(pool, moe.config, moe.weights, inout, 2, &ws, inout), "overlap");
}

}  // namespace
}  // namespace tessera::kernels::cpu
