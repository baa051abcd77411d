// Causal depthwise conv1d with state (causal_conv1d.h) against the f64 reference, prefill then
// decode == one prefill (bit for bit), and bit-exact batch / thread-count invariance of decode.
// Gated RMSNorm (gated_rms_norm.h) against its f64 reference.
//
// Tolerance: an output is K f32 products summed (FMA on AVX) then silu, all of order 1:
// a few ulp, so 1e-6 absolute + 4e-6 relative.
#include "kernels/cpu/causal_conv1d.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/gated_rms_norm.h"
#include "kernels/cpu/gdn_reference.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::AllNear;
using testing::BitEqual;
using testing::RandomVector;

constexpr double kAbsTol = 1e-6;
constexpr double kRelTol = 4e-6;

CausalConvParams Conv(int64_t channels, int kernel, bool silu = true) {
  return CausalConvParams{channels, kernel, silu};
}

// One sequence through the fast kernel, state in slot 0 of a one-slot pool.
std::vector<float> RunConv(ThreadPool& pool, const CausalConvParams& p, const std::vector<float>& w,
                           const std::vector<float>& x, int64_t t, std::vector<float>& state,
                           Isa isa) {
  std::vector<float> out(static_cast<size_t>(t * p.channels));
  const RecurrentSequence seq{0, t, 0};
  CausalConv1d(pool, p, w, x, p.channels, {&seq, 1}, state, out, p.channels, isa);
  return out;
}

class CpuCausalConvTest : public ::testing::TestWithParam<Isa> {
 protected:
  ThreadPool pool_{3};
};

TEST_P(CpuCausalConvTest, MatchesReference) {
  uint64_t seed = 1;
  for (int64_t c : {1, 17, 64, 100}) {
    for (int k : {1, 2, 4, 5, 9}) {
      for (int64_t t : {1, 3, 15, 16, 17, 97}) {
        for (bool silu : {true, false}) {
          const auto p = Conv(c, k, silu);
          const auto w = RandomVector(c * k, ++seed);
          const auto x = RandomVector(t * c, ++seed, -2.0f, 2.0f);
          std::vector<float> state = RandomVector(ConvStateElements(p), ++seed, -2.0f, 2.0f);
          std::vector<float> ref_state = state, ref(t * c);
          const auto out = RunConv(pool_, p, w, x, t, state, GetParam());
          reference::CausalConv1d(p, w, x, t, ref_state, ref);
          ASSERT_TRUE(AllNear(out, ref, kAbsTol, kRelTol)) << c << " " << k << " " << t;
          ASSERT_TRUE(BitEqual(state, ref_state)) << c << " " << k << " " << t;  // copies
        }
      }
    }
  }
}

// Prefill of T then single-token decodes (and prefills split anywhere, also shorter than K-1)
// give exactly the outputs and state of one prefill over all tokens.
TEST_P(CpuCausalConvTest, SplitCallsEqualOnePrefill) {
  const auto p = Conv(37, 4);
  const int64_t total = 40;
  const auto w = RandomVector(37 * 4, 10);
  const auto x = RandomVector(total * 37, 11, -2.0f, 2.0f);
  std::vector<float> whole_state(ConvStateElements(p), 0.0f);
  const auto whole = RunConv(pool_, p, w, x, total, whole_state, GetParam());
  for (const std::vector<int64_t>& parts :
       {std::vector<int64_t>{33, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 2, 36}, {20, 20}}) {
    std::vector<float> state(ConvStateElements(p), 0.0f), out;
    int64_t done = 0;
    for (int64_t n : parts) {
      const std::vector<float> xs(x.begin() + done * 37, x.begin() + (done + n) * 37);
      const auto part = RunConv(pool_, p, w, xs, n, state, GetParam());
      out.insert(out.end(), part.begin(), part.end());
      done += n;
    }
    ASSERT_EQ(done, total);
    EXPECT_TRUE(BitEqual(out, whole));
    EXPECT_TRUE(BitEqual(state, whole_state));
  }
}

// One decode step for N sequences in one call (shuffled slots, strided rows, mixed with a
// prefill) is bit-identical to each sequence alone, for any thread count.
TEST_P(CpuCausalConvTest, BatchedDecodeIsBitIdenticalToAlone) {
  const auto p = Conv(70, 4);
  const int64_t state_size = ConvStateElements(p);
  const auto w = RandomVector(70 * 4, 20);
  const std::vector<int64_t> tokens = {1, 1, 5, 1, 1};
  const std::vector<int64_t> slots = {3, 0, 4, 2, 1};
  const int64_t stride = 80;  // rows of a wider buffer
  std::vector<RecurrentSequence> seqs;
  int64_t rows = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    seqs.push_back({rows, tokens[i], slots[i]});
    rows += tokens[i];
  }
  const auto x = RandomVector(rows * stride, 21, -2.0f, 2.0f);
  const auto initial = RandomVector(slots.size() * state_size, 22, -2.0f, 2.0f);
  for (int threads : {1, 4}) {
    ThreadPool pool(threads);
    std::vector<float> states = initial, out(rows * stride, 0.0f);
    CausalConv1d(pool, p, w, x, stride, seqs, states, out, stride, GetParam());
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::vector<float> xs, alone_state(initial.begin() + slots[i] * state_size,
                                         initial.begin() + (slots[i] + 1) * state_size);
      for (int64_t r = 0; r < tokens[i]; ++r) {
        const auto* row = x.data() + (seqs[i].token_begin + r) * stride;
        xs.insert(xs.end(), row, row + 70);
      }
      const auto alone = RunConv(pool_, p, w, xs, tokens[i], alone_state, GetParam());
      for (int64_t r = 0; r < tokens[i]; ++r) {
        EXPECT_TRUE(BitEqual({alone.data() + r * 70, 70},
                             {out.data() + (seqs[i].token_begin + r) * stride, 70}))
            << "sequence " << i << " token " << r << ", " << threads << " threads";
      }
      EXPECT_TRUE(BitEqual(
          alone_state, {states.data() + slots[i] * state_size, static_cast<size_t>(state_size)}));
    }
  }
}

// A sequence with no rows in the step keeps its state.
TEST_P(CpuCausalConvTest, EmptySequenceKeepsItsState) {
  const auto p = Conv(20, 4);
  const auto w = RandomVector(80, 40);
  const auto x = RandomVector(2 * 20, 41);
  const auto initial = RandomVector(2 * ConvStateElements(p), 42);
  std::vector<float> states = initial, out(2 * 20);
  const std::vector<RecurrentSequence> seqs = {{0, 0, 1}, {0, 2, 0}};
  CausalConv1d(pool_, p, w, x, 20, seqs, states, out, 20, GetParam());
  EXPECT_TRUE(BitEqual({states.data() + 60, 60}, {initial.data() + 60, 60}));
}

TEST_P(CpuCausalConvTest, GatedRmsNormMatchesReference) {
  for (int64_t d : {16, 17, 128}) {
    for (int64_t rows : {1, 3, 32}) {
      const auto x = RandomVector(rows * d, d + rows, -3.0f, 3.0f);
      const auto z = RandomVector(rows * d, d + rows + 1, -8.0f, 8.0f);
      const auto w = RandomVector(d, d, 0.5f, 1.5f);
      std::vector<float> y(rows * d), ref(rows * d), in_place = x;
      GatedRmsNorm(x, z, w, 1e-6f, rows, y, GetParam());
      reference::GatedRmsNorm(x, z, w, 1e-6f, rows, ref);
      ASSERT_TRUE(AllNear(y, ref, 2e-6, 4e-6)) << "d=" << d << " rows=" << rows;
      GatedRmsNorm(in_place, z, w, 1e-6f, rows, in_place, GetParam());
      EXPECT_TRUE(BitEqual(in_place, y));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuIsas, CpuCausalConvTest, ::testing::ValuesIn(SupportedIsas()),
                         testing::IsaParamName);

// Slots must be distinct (two sequences writing one state would race) and rows back to back.
TEST(CpuCausalConvDeathTest, BadSequenceListsAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ThreadPool pool(1);
  const auto p = Conv(20, 4);
  const auto w = RandomVector(80, 40);
  const auto x = RandomVector(2 * 20, 41);
  std::vector<float> states(2 * ConvStateElements(p)), out(2 * 20);
  const std::vector<RecurrentSequence> same_slot = {{0, 1, 0}, {1, 1, 0}};
  EXPECT_DEATH(CausalConv1d(pool, p, w, x, 20, same_slot, states, out, 20), "bad sequence list");
  const std::vector<RecurrentSequence> gap = {{0, 1, 0}, {2, 0, 1}};
  EXPECT_DEATH(CausalConv1d(pool, p, w, x, 20, gap, states, out, 20), "bad sequence list");
  const std::vector<RecurrentSequence> past_pool = {{0, 1, 2}};
  EXPECT_DEATH(CausalConv1d(pool, p, w, x, 20, past_pool, states, out, 20), "bad sequence list");
}

TEST(CpuCausalConvIsaTest, Avx2AndAvx512AreBitIdentical) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool(2);
  const auto p = Conv(100, 4);
  const auto w = RandomVector(400, 30);
  const auto x = RandomVector(17 * 100, 31, -4.0f, 4.0f);
  std::vector<float> s1 = RandomVector(300, 32), s2 = s1;
  EXPECT_TRUE(BitEqual(RunConv(pool, p, w, x, 17, s1, Isa::kAvx2),
                       RunConv(pool, p, w, x, 17, s2, Isa::kAvx512)));
  EXPECT_TRUE(BitEqual(s1, s2));
}

}  // namespace
}  // namespace tessera::kernels::cpu
