// Gated delta rule CUDA kernels (gated_delta_rule.cuh: recurrent, chunked, auto) on the emulator
// against the CPU kernel (kernels/cpu/gated_delta_rule.h) and the f64 reference, under every test
// schedule: one launch mixing sequences of 0, 1, 5, 64, 65 and 130 tokens in distinct
// non-contiguous slots (plus a padding entry), q/k/v as strided views, f32 and bf16 activations,
// head dims 16 to 256 with h_v / h_k = 1, 2, 3 and both head mappings; slots not named untouched;
// chunked == recurrent; prefill then decode == one longer prefill.
//
// Tolerances are the CPU test's (gated_delta_rule_test.cc; inputs in [-1, 1], β in [0, 1],
// g in [g_lo, 0], states in [-0.5, 0.5]): kRecurrentTol = 5e-6 absolute for the f32 recurrence
// against the CPU kernel and f64, kChunkedTol = 2e-5 for the chunked form (the CUDA kernel sums
// the q/k norms in f32 and in another order; measured errors stay well below). Outputs of T are
// rounded once more: plus a relative 2^-8 (bf16). States stay f32 whatever T.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tests/unit/cuda/gdn_test_data.h"

namespace tessera::cuda {
namespace {

using gdn_test::Heads;
using gdn_test::Result;
using gdn_test::Step;
using gdn_test::StepData;

static_assert(kGdnChunkSize == kernels::cpu::kGdnChunkSize);
static_assert(kGdnMinChunkedTokens == kernels::cpu::kGdnMinChunkedTokens);

constexpr double kRecurrentTol = 5e-6;
constexpr double kChunkedTol = 2e-5;

template <typename T>
double OutputRounding() {
  return std::is_same_v<T, float> ? 0.0 : 1.0 / 256;
}

// Every |actual - expected| <= abs_tol + rel_tol·|expected|; names the worst element otherwise.
::testing::AssertionResult AllNear(std::span<const float> actual, std::span<const float> expected,
                                   double abs_tol, double rel_tol) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "size differs";
  double worst = 0.0;
  size_t worst_index = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double excess =
        std::fabs(double{actual[i]} - expected[i]) - rel_tol * std::fabs(expected[i]);
    if (!(excess <= worst)) {  // NaN counts as worst
      worst = std::isnan(excess) ? INFINITY : excess;
      worst_index = i;
    }
  }
  if (worst <= abs_tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_index << ": " << actual[worst_index] << " vs "
         << expected[worst_index] << " (excess " << worst << " > " << abs_tol << ")";
}

std::string Describe(const Heads& h) {
  return "hk=" + std::to_string(h.hk) + " hv=" + std::to_string(h.hv) +
         " dk=" + std::to_string(h.dk) + " dv=" + std::to_string(h.dv) +
         (h.mapping == GdnHeadMapping::kTiled ? " tiled" : " grouped");
}

// Slots not named by the step hold their initial state, bit for bit.
template <typename T>
void ExpectUnnamedSlotsUntouched(const StepData<T>& d, const Step& step, const Result& r) {
  for (int slot = 0; slot < step.num_slots; ++slot) {
    if (std::find(step.slots.begin(), step.slots.end(), slot) != step.slots.end()) continue;
    for (int64_t e = slot * d.state_size(); e < (slot + 1) * d.state_size(); ++e) {
      ASSERT_TRUE(simt::SameBits(r.states[e], d.states[e])) << "unnamed slot " << slot;
    }
  }
}

// kAuto is, sequence by sequence, exactly the recurrent launch below kGdnMinChunkedTokens tokens
// and exactly the chunked launch from there on (blocks see only their own sequence).
template <typename T>
void ExpectAutoPicksPerSequence(const StepData<T>& d, const Result& automatic,
                                const Result& recurrent, const Result& chunked) {
  for (const auto& s : d.cpu_seqs) {
    const Result& expected = s.num_tokens < kGdnMinChunkedTokens ? recurrent : chunked;
    for (int64_t i = s.token_begin * d.out_width();
         i < (s.token_begin + s.num_tokens) * d.out_width(); ++i) {
      ASSERT_TRUE(simt::SameBits(automatic.out[i], expected.out[i])) << "auto out " << i;
    }
    for (int64_t i = s.state_slot * d.state_size(); i < (s.state_slot + 1) * d.state_size(); ++i) {
      ASSERT_TRUE(simt::SameBits(automatic.states[i], expected.states[i])) << "auto state " << i;
    }
  }
}

template <typename T>
void CheckMixedStep(const simt::Schedule& schedule, const Heads& heads, const Step& step,
                    std::mt19937& rng, float g_lo = -1.0f) {
  SCOPED_TRACE(Describe(heads));
  const StepData<T> d = gdn_test::MakeStepData<T>(gdn_test::DeviceParams(heads), step, rng, g_lo);
  const Result recurrent = gdn_test::RunDevice(schedule, d, GdnForm::kRecurrent);
  const Result chunked = gdn_test::RunDevice(schedule, d, GdnForm::kChunked);
  const Result automatic = gdn_test::RunDevice(schedule, d, GdnForm::kAuto);
  const Result cpu_recurrent = gdn_test::RunCpu(d, GdnForm::kRecurrent);
  const Result cpu_chunked = gdn_test::RunCpu(d, GdnForm::kChunked);
  const Result reference = gdn_test::RunReference(d);
  const double rounding = OutputRounding<T>();
  EXPECT_TRUE(AllNear(recurrent.out, cpu_recurrent.out, kRecurrentTol, rounding));
  EXPECT_TRUE(AllNear(recurrent.states, cpu_recurrent.states, kRecurrentTol, 0));
  EXPECT_TRUE(AllNear(recurrent.out, reference.out, kRecurrentTol, rounding));
  EXPECT_TRUE(AllNear(recurrent.states, reference.states, kRecurrentTol, 0));
  EXPECT_TRUE(AllNear(chunked.out, cpu_chunked.out, kChunkedTol, rounding));
  EXPECT_TRUE(AllNear(chunked.states, cpu_chunked.states, kChunkedTol, 0));
  EXPECT_TRUE(AllNear(chunked.out, reference.out, kChunkedTol, rounding));
  EXPECT_TRUE(AllNear(chunked.states, reference.states, kChunkedTol, 0));
  // chunked == recurrent; two outputs rounded to T may differ by one unit in the last place
  EXPECT_TRUE(AllNear(chunked.out, recurrent.out, kChunkedTol, 2 * rounding));
  EXPECT_TRUE(AllNear(chunked.states, recurrent.states, kChunkedTol, 0));
  ExpectAutoPicksPerSequence(d, automatic, recurrent, chunked);
  for (const Result* r : {&recurrent, &chunked, &automatic})
    ExpectUnnamedSlotsUntouched(d, step, *r);
}

// Tokens 0, 1, 5, 64, 65, 130 (+ a padding entry), in slots 3, 7, 0, 5, 9, 2 of 11.
const Step kMixedStep{{0, 1, 5, 64, 65, 130}, {3, 7, 0, 5, 9, 2}, 11};

class GatedDeltaRuleKernelTest : public simt::KernelTest {};

TEST_P(GatedDeltaRuleKernelTest, MixedStepMatchesCpuKernelAndReference) {
  std::mt19937 rng(2024);
  for (const Heads& h : {Heads{1, 1, 16, 16},
                         {1, 2, 24, 40},
                         {2, 6, 40, 24},
                         {2, 6, 40, 24, GdnHeadMapping::kTiled}}) {
    CheckMixedStep<float>(GetParam(), h, kMixedStep, rng);
    CheckMixedStep<__nv_bfloat16>(GetParam(), h, kMixedStep, rng);
  }
}

TEST_P(GatedDeltaRuleKernelTest, PublishedHeadDims) {
  std::mt19937 rng(2025);
  CheckMixedStep<__nv_bfloat16>(GetParam(), {1, 3, 128, 128}, kMixedStep, rng);
}

TEST_P(GatedDeltaRuleKernelTest, LargestHeadDims) {
  std::mt19937 rng(2026);
  CheckMixedStep<float>(GetParam(), {1, 1, 256, 256}, {{1, 65}, {2, 0}, 3}, rng);
}

TEST_P(GatedDeltaRuleKernelTest, StrongDecay) {
  std::mt19937 rng(2027);
  for (auto mapping : {GdnHeadMapping::kGrouped, GdnHeadMapping::kTiled}) {
    CheckMixedStep<float>(GetParam(), {2, 4, 16, 32, mapping}, {{17, 130}, {1, 0}, 2}, rng,
                          /*g_lo=*/-20.0f);
  }
}

// A 70-token prompt as one kAuto launch (chunked), and as a chunked prefill of 65 (or 64, or 17)
// tokens then recurrent decode launches of one token (or a short second prefill): outputs and
// state within kChunkedTol of each other and of the f64 reference.
template <typename T>
void CheckPrefillThenDecode(const simt::Schedule& schedule, std::mt19937& rng) {
  const Heads heads{2, 4, 32, 48};
  const StepData<T> d =
      gdn_test::MakeStepData<T>(gdn_test::DeviceParams(heads), {{70}, {1}, 3}, rng);
  const Result whole = gdn_test::RunDevice(schedule, d, GdnForm::kAuto);
  const Result reference = gdn_test::RunReference(d);
  const double rounding = OutputRounding<T>();
  EXPECT_TRUE(AllNear(whole.out, reference.out, kChunkedTol, rounding));
  for (const std::vector<int>& ends :
       {std::vector<int>{65, 66, 67, 68, 69, 70}, {64, 70}, {17, 18, 70}}) {
    SCOPED_TRACE("first part " + std::to_string(ends[0]));
    const Result parts = gdn_test::RunDeviceInParts(schedule, d, ends, GdnForm::kAuto);
    EXPECT_TRUE(AllNear(parts.out, whole.out, kChunkedTol, 2 * rounding));
    EXPECT_TRUE(AllNear(parts.states, whole.states, kChunkedTol, 0));
    EXPECT_TRUE(AllNear(parts.out, reference.out, kChunkedTol, rounding));
    EXPECT_TRUE(AllNear(parts.states, reference.states, kChunkedTol, 0));
  }
}

TEST_P(GatedDeltaRuleKernelTest, PrefillThenDecodeEqualsOneLongerPrefill) {
  std::mt19937 rng(2028);
  CheckPrefillThenDecode<float>(GetParam(), rng);
  CheckPrefillThenDecode<__nv_bfloat16>(GetParam(), rng);
}

INSTANTIATE_TEST_SUITE_P(Schedules, GatedDeltaRuleKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
