// Gated delta rule (gated_delta_rule.h): recurrent and chunked forms against the f64
// references, chunked == token-by-token recurrence (outputs and state, across split prefills),
// bit-exact batch and thread-count invariance of decode, and the g = 0 / β = 0 edge cases.
//
// Tolerances (absolute, on outputs up to ~0.4 and states up to ~1.5; inputs in [-1, 1],
// β in [0, 1], g in [g_lo, 0]):
//  * kRecurrentTol: the f32 recurrence against f64. Each token adds a few f32 roundings per state
//    element (d_k-term sums); the delta rule contracts the state along k̂ (β ≤ 1, ‖k̂‖ = 1) and the
//    decay shrinks it, so errors stay bounded instead of growing with T. Measured max over these
//    shapes with T up to 1000 and g_lo in {-0.01, -1, -20}, every ISA: 1.2e-7 (outputs),
//    6.6e-7 (state).
//  * kChunkedTol: the chunked form adds the solve of (I + A) and the e^{γ} products inside a
//    chunk; same sweep: 1.3e-6 (outputs, also chunked vs recurrent), 2.1e-6 (state).
//  Both leave ~8-10x headroom; a wrong index, a missing decay or a dropped term gives errors of
//  order 1e-2 to 1 (see the deliberate breaks in the branch report).
#include "kernels/cpu/gated_delta_rule.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/gdn_reference.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/unit/kernels/gdn_test_util.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::GdnParams;
using testing::GdnSeqInputs;
using testing::MaxAbsDiff;
using testing::RandomGdnInputs;
using testing::RandomGdnState;
using testing::RunGdn;
using testing::RunGdnReference;
using testing::SliceTokens;

constexpr double kRecurrentTol = 5e-6;
constexpr double kChunkedTol = 2e-5;

struct Heads {
  int hk, hv, dk, dv;
};

// h_k = 1, 2 with h_v = 1, 2, 4 x h_k; d_k != d_v; the published 128/128.
const Heads kHeads[] = {{1, 1, 16, 32}, {1, 2, 32, 16},   {2, 4, 16, 32},
                        {2, 8, 20, 13}, {2, 2, 128, 128}, {1, 4, 64, 48}};
constexpr int64_t kLengths[] = {1, 15, 16, 17, 63, 64, 65, 97, 200};

std::string Describe(const Heads& h, int64_t t) {
  return "hk=" + std::to_string(h.hk) + " hv=" + std::to_string(h.hv) +
         " dk=" + std::to_string(h.dk) + " dv=" + std::to_string(h.dv) + " T=" + std::to_string(t);
}

class CpuGatedDeltaRuleTest : public ::testing::TestWithParam<Isa> {
 protected:
  ThreadPool pool_{3};
};

TEST_P(CpuGatedDeltaRuleTest, BothFormsMatchTheReference) {
  uint64_t seed = 1;
  for (const Heads& h : kHeads) {
    for (int64_t t : kLengths) {
      if (h.dk == 128 && t > 97) continue;  // keep the f64 reference cheap
      const auto p = GdnParams(h.hk, h.hv, h.dk, h.dv);
      const GdnSeqInputs in = RandomGdnInputs(p, t, ++seed);
      const std::vector<float> initial = RandomGdnState(p, seed);
      std::vector<float> ref_state = initial, rec_state = initial, chunk_state = initial;
      const auto ref = RunGdnReference(p, in, ref_state);
      const auto rec = RunGdn(pool_, p, in, rec_state, GdnForm::kRecurrent, GetParam());
      const auto chunk = RunGdn(pool_, p, in, chunk_state, GdnForm::kChunked, GetParam());
      EXPECT_LE(MaxAbsDiff(rec, ref), kRecurrentTol) << Describe(h, t);
      EXPECT_LE(MaxAbsDiff(rec_state, ref_state), kRecurrentTol) << Describe(h, t);
      EXPECT_LE(MaxAbsDiff(chunk, ref), kChunkedTol) << Describe(h, t);
      EXPECT_LE(MaxAbsDiff(chunk_state, ref_state), kChunkedTol) << Describe(h, t);
      EXPECT_LE(MaxAbsDiff(chunk, rec), kChunkedTol) << Describe(h, t);  // chunked == recurrent
      EXPECT_LE(MaxAbsDiff(chunk_state, rec_state), kChunkedTol) << Describe(h, t);
    }
  }
}

TEST_P(CpuGatedDeltaRuleTest, StrongDecayAndTiledHeads) {
  uint64_t seed = 100;
  for (GdnHeadMapping mapping : {GdnHeadMapping::kGrouped, GdnHeadMapping::kTiled}) {
    for (int64_t t : {17, 130}) {
      const auto p = GdnParams(2, 4, 16, 32, mapping);
      const GdnSeqInputs in = RandomGdnInputs(p, t, ++seed, /*g_lo=*/-20.0f);
      std::vector<float> ref_state = RandomGdnState(p, seed);
      std::vector<float> chunk_state = ref_state;
      const auto ref = RunGdnReference(p, in, ref_state);
      const auto chunk = RunGdn(pool_, p, in, chunk_state, GdnForm::kChunked, GetParam());
      EXPECT_LE(MaxAbsDiff(chunk, ref), kChunkedTol) << "T=" << t;
      EXPECT_LE(MaxAbsDiff(chunk_state, ref_state), kChunkedTol) << "T=" << t;
    }
  }
}

// The state a chunked prefill leaves is the recurrence's, so a prompt split into two prefill
// calls (or a prefill then decode steps) continues correctly.
TEST_P(CpuGatedDeltaRuleTest, StateCarriesAcrossPrefillCalls) {
  const auto p = GdnParams(2, 4, 32, 16);
  uint64_t seed = 200;
  for (auto [first, second] : {std::pair{1, 63}, {17, 80}, {64, 65}, {100, 100}}) {
    const GdnSeqInputs in = RandomGdnInputs(p, first + second, ++seed);
    std::vector<float> whole_state(GdnStateElements(p), 0.0f), split_state = whole_state;
    const auto whole = RunGdn(pool_, p, in, whole_state, GdnForm::kRecurrent, GetParam());
    const auto a =
        RunGdn(pool_, p, SliceTokens(p, in, 0, first), split_state, GdnForm::kChunked, GetParam());
    const auto b = RunGdn(pool_, p, SliceTokens(p, in, first, first + second), split_state,
                          GdnForm::kChunked, GetParam());
    std::vector<float> split = a;
    split.insert(split.end(), b.begin(), b.end());
    EXPECT_LE(MaxAbsDiff(split, whole), kChunkedTol) << first << "+" << second;
    EXPECT_LE(MaxAbsDiff(split_state, whole_state), kChunkedTol) << first << "+" << second;
  }
}

// Many sequences in one call, each with its own slot: every sequence's outputs and state are
// bit-identical to running it alone, whatever the slot order, the neighbours or the threads.
TEST_P(CpuGatedDeltaRuleTest, BatchedSequencesAreBitIdenticalToAlone) {
  const auto p = GdnParams(2, 4, 32, 48);
  const int64_t state_size = GdnStateElements(p);
  const std::vector<int64_t> tokens = {1, 1, 37, 1, 70, 3};  // decodes mixed with prefills
  const std::vector<int64_t> slots = {4, 0, 5, 2, 1, 3};
  std::vector<GdnSeqInputs> inputs;
  std::vector<float> pool_states(slots.size() * state_size);
  GdnSeqInputs all{{}, {}, {}, {}, {}, 0};
  std::vector<RecurrentSequence> seqs;
  for (size_t i = 0; i < tokens.size(); ++i) {
    inputs.push_back(RandomGdnInputs(p, tokens[i], 300 + i));
    const auto s = RandomGdnState(p, 300 + i);
    std::copy(s.begin(), s.end(), pool_states.begin() + slots[i] * state_size);
    seqs.push_back({all.num_tokens, tokens[i], slots[i]});
    for (auto [dst, src] : {std::pair{&all.q, &inputs[i].q},
                            {&all.k, &inputs[i].k},
                            {&all.v, &inputs[i].v},
                            {&all.g, &inputs[i].g},
                            {&all.beta, &inputs[i].beta}}) {
      dst->insert(dst->end(), src->begin(), src->end());
    }
    all.num_tokens += tokens[i];
  }
  const int64_t row = int64_t{p.num_v_heads} * p.head_v_dim;
  for (int threads : {1, 4}) {
    ThreadPool pool(threads);
    std::vector<float> states = pool_states, out(all.num_tokens * row);
    GatedDeltaRule(pool, p, all.Inputs(p), seqs, states, out, GdnForm::kAuto, GetParam());
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::vector<float> alone_state = RandomGdnState(p, 300 + i);
      const GdnForm form =
          tokens[i] < kGdnMinChunkedTokens ? GdnForm::kRecurrent : GdnForm::kChunked;
      const auto alone = RunGdn(pool_, p, inputs[i], alone_state, form, GetParam());
      EXPECT_TRUE(BitEqual(alone, {out.data() + seqs[i].token_begin * row, alone.size()}))
          << "sequence " << i << ", " << threads << " threads";
      EXPECT_TRUE(BitEqual(
          alone_state, {states.data() + slots[i] * state_size, static_cast<size_t>(state_size)}))
          << "sequence " << i << ", " << threads << " threads";
    }
  }
}

// With g = 0 and β = 0 nothing is forgotten or written: both forms leave the state bit for bit.
// With β = 0 alone the state only decays: S_T = e^{Σ g} S_0.
TEST_P(CpuGatedDeltaRuleTest, ZeroDecayAndZeroBetaEdgeCases) {
  const auto p = GdnParams(1, 2, 16, 32);
  for (GdnForm form : {GdnForm::kRecurrent, GdnForm::kChunked}) {
    GdnSeqInputs in = RandomGdnInputs(p, 97, 400);
    std::fill(in.beta.begin(), in.beta.end(), 0.0f);
    std::vector<float> decayed = RandomGdnState(p, 400), ref_state = decayed;
    const auto out = RunGdn(pool_, p, in, decayed, form, GetParam());
    const auto ref = RunGdnReference(p, in, ref_state);
    EXPECT_LE(MaxAbsDiff(out, ref), kChunkedTol);
    EXPECT_LE(MaxAbsDiff(decayed, ref_state), kChunkedTol);
    std::fill(in.g.begin(), in.g.end(), 0.0f);
    const std::vector<float> initial = RandomGdnState(p, 401);
    std::vector<float> kept = initial;
    RunGdn(pool_, p, in, kept, form, GetParam());
    EXPECT_TRUE(BitEqual(kept, initial));
    in = RandomGdnInputs(p, 97, 402);  // g = 0, β random: no decay, pure delta rule
    std::fill(in.g.begin(), in.g.end(), 0.0f);
    std::vector<float> state = initial;
    ref_state = initial;
    const auto delta = RunGdn(pool_, p, in, state, form, GetParam());
    const auto delta_ref = RunGdnReference(p, in, ref_state);
    EXPECT_LE(MaxAbsDiff(delta, delta_ref), kChunkedTol);
    EXPECT_LE(MaxAbsDiff(state, ref_state), kChunkedTol);
  }
}

// Inputs read through strided views of one conv-output buffer [T, q | k | v] (as the model
// passes them) give the bits of contiguous inputs.
TEST_P(CpuGatedDeltaRuleTest, StridedViewsMatchContiguousInputs) {
  const auto p = GdnParams(2, 4, 16, 32);
  const GdnSeqInputs in = RandomGdnInputs(p, 70, 500);
  const int64_t qk = 2 * 16;
  const int64_t vw = 4 * 32;
  const int64_t width = 2 * qk + vw;
  std::vector<float> mixed(in.num_tokens * width);
  for (int64_t t = 0; t < in.num_tokens; ++t) {
    std::copy_n(in.q.begin() + t * qk, qk, mixed.begin() + t * width);
    std::copy_n(in.k.begin() + t * qk, qk, mixed.begin() + t * width + qk);
    std::copy_n(in.v.begin() + t * vw, vw, mixed.begin() + t * width + 2 * qk);
  }
  const std::span<const float> m(mixed);
  const GdnInputs views{m, width, m.subspan(qk), width, m.subspan(2 * qk), width, in.g, in.beta};
  for (GdnForm form : {GdnForm::kRecurrent, GdnForm::kChunked}) {
    std::vector<float> s1 = RandomGdnState(p, 501), s2 = s1;
    std::vector<float> out(in.num_tokens * vw);
    const RecurrentSequence seq{0, in.num_tokens, 0};
    GatedDeltaRule(pool_, p, views, {&seq, 1}, s1, out, form, GetParam());
    const auto contiguous = RunGdn(pool_, p, in, s2, form, GetParam());
    EXPECT_TRUE(BitEqual(out, contiguous));
    EXPECT_TRUE(BitEqual(s1, s2));
  }
}

INSTANTIATE_TEST_SUITE_P(CpuIsas, CpuGatedDeltaRuleTest, ::testing::ValuesIn(SupportedIsas()),
                         testing::IsaParamName);

// The f64 chunked reference (HF's WY algorithm) equals the f64 recurrence: the algorithm, not
// just our f32 kernel, is checked, including the zero-padded last chunk.
TEST(CpuGatedDeltaRuleReferenceTest, ChunkedReferenceEqualsRecurrentReference) {
  for (const Heads& h : {Heads{1, 2, 16, 32}, Heads{2, 4, 32, 16}}) {
    for (int64_t t : {1, 17, 64, 97}) {
      const auto p = GdnParams(h.hk, h.hv, h.dk, h.dv);
      const GdnSeqInputs in = RandomGdnInputs(p, t, 600 + t);
      std::vector<float> s1 = RandomGdnState(p, 600), s2 = s1;
      std::vector<float> rec = RunGdnReference(p, in, s1), chunk(rec.size());
      reference::GatedDeltaRuleChunked(p, in.Data(), 64, s2, chunk);
      EXPECT_LE(MaxAbsDiff(chunk, rec), 1e-6) << Describe(h, t);
      EXPECT_LE(MaxAbsDiff(s2, s1), 1e-6) << Describe(h, t);
    }
  }
}

// Gates from strided views of one [rows, 2·h_v] projection output (b at 0, alpha at h_v), across
// softplus's linear threshold and sigmoid's tails.
TEST(CpuGdnGatesTest, MatchReference) {
  const int64_t rows = 37;
  const int64_t heads = 6;
  const auto ba = testing::RandomVector(rows * 2 * heads, 800, -30.0f, 30.0f);
  const auto a_log = testing::RandomVector(heads, 801, -2.0f, 2.5f);
  const auto dt_bias = testing::RandomVector(heads, 802, -1.0f, 1.0f);
  std::vector<float> a_coef(heads), b(rows * heads), alpha(rows * heads);
  for (int64_t h = 0; h < heads; ++h) a_coef[h] = -std::exp(a_log[h]);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(ba.begin() + r * 2 * heads, heads, b.begin() + r * heads);
    std::copy_n(ba.begin() + r * 2 * heads + heads, heads, alpha.begin() + r * heads);
  }
  std::vector<float> g(rows * heads), beta(rows * heads), ref_g(g.size()), ref_beta(g.size());
  const std::span<const float> view(ba);
  GdnGates(view, 2 * heads, view.subspan(heads), 2 * heads, a_coef, dt_bias, rows, g, beta);
  reference::GdnGates(b, alpha, a_coef, dt_bias, rows, ref_g, ref_beta);
  EXPECT_TRUE(testing::AllNear(g, ref_g, 1e-6, 2e-6));  // softplus(x > 20) = x is off by < e^-20
  EXPECT_TRUE(testing::AllNear(beta, ref_beta, 1e-7, 1e-6));
  for (float x : g) EXPECT_LE(x, 0.0f);
}

TEST(CpuGatedDeltaRuleIsaTest, Avx2AndAvx512AreBitIdentical) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool(2);
  const auto p = GdnParams(2, 4, 20, 40);
  const GdnSeqInputs in = RandomGdnInputs(p, 90, 700);
  for (GdnForm form : {GdnForm::kRecurrent, GdnForm::kChunked}) {
    std::vector<float> s1 = RandomGdnState(p, 700), s2 = s1;
    EXPECT_TRUE(BitEqual(RunGdn(pool, p, in, s1, form, Isa::kAvx2),
                         RunGdn(pool, p, in, s2, form, Isa::kAvx512)));
    EXPECT_TRUE(BitEqual(s1, s2));
  }
}

}  // namespace
}  // namespace tessera::kernels::cpu
