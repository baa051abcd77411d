// Helpers of the Gated DeltaNet kernel tests: random per-sequence inputs and single-sequence
// runs of the fast kernel and the references.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/gated_delta_rule.h"
#include "kernels/cpu/gdn_reference.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/unit/kernels/test_util.h"

namespace tessera::kernels::cpu::testing {

// One sequence's contiguous inputs: q, k [T, h_k, d_k]; v [T, h_v, d_v]; g, beta [T, h_v].
struct GdnSeqInputs {
  std::vector<float> q, k, v, g, beta;
  int64_t num_tokens = 0;

  reference::GdnSequenceData Data() const { return {q, k, v, g, beta, num_tokens}; }
  GdnInputs Inputs(const GatedDeltaRuleParams& p) const {
    return GdnInputs{
        q, int64_t{p.num_k_heads} * p.head_k_dim, k, int64_t{p.num_k_heads} * p.head_k_dim,
        v, int64_t{p.num_v_heads} * p.head_v_dim, g, beta};
  }
};

inline GatedDeltaRuleParams GdnParams(int hk, int hv, int dk, int dv,
                                      GdnHeadMapping mapping = GdnHeadMapping::kGrouped) {
  GatedDeltaRuleParams p;
  p.num_k_heads = hk;
  p.num_v_heads = hv;
  p.head_k_dim = dk;
  p.head_v_dim = dv;
  p.head_mapping = mapping;
  p.q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  return p;
}

// Random inputs with the models' ranges: g in [g_lo, 0] (log-decay), beta in [0, 1].
inline GdnSeqInputs RandomGdnInputs(const GatedDeltaRuleParams& p, int64_t t, uint64_t seed,
                                    float g_lo = -1.0f) {
  GdnSeqInputs in;
  in.num_tokens = t;
  const size_t qk = static_cast<size_t>(t * p.num_k_heads * p.head_k_dim);
  in.q = RandomVector(qk, seed * 8 + 1);
  in.k = RandomVector(qk, seed * 8 + 2);
  in.v = RandomVector(static_cast<size_t>(t * p.num_v_heads * p.head_v_dim), seed * 8 + 3);
  in.g = RandomVector(static_cast<size_t>(t * p.num_v_heads), seed * 8 + 4, g_lo, 0.0f);
  in.beta = RandomVector(static_cast<size_t>(t * p.num_v_heads), seed * 8 + 5, 0.0f, 1.0f);
  return in;
}

// A state as a sequence would carry it: entries of order 1.
inline std::vector<float> RandomGdnState(const GatedDeltaRuleParams& p, uint64_t seed) {
  return RandomVector(static_cast<size_t>(GdnStateElements(p)), seed * 8 + 6, -0.5f, 0.5f);
}

// Runs the fast kernel on one sequence whose state is `state` (slot 0 of a one-slot pool).
inline std::vector<float> RunGdn(ThreadPool& pool, const GatedDeltaRuleParams& p,
                                 const GdnSeqInputs& in, std::vector<float>& state, GdnForm form,
                                 Isa isa) {
  std::vector<float> out(static_cast<size_t>(in.num_tokens * p.num_v_heads * p.head_v_dim));
  const RecurrentSequence seq{0, in.num_tokens, 0};
  GatedDeltaRule(pool, p, in.Inputs(p), {&seq, 1}, state, out, form, isa);
  return out;
}

inline std::vector<float> RunGdnReference(const GatedDeltaRuleParams& p, const GdnSeqInputs& in,
                                          std::vector<float>& state) {
  std::vector<float> out(static_cast<size_t>(in.num_tokens * p.num_v_heads * p.head_v_dim));
  reference::GatedDeltaRuleRecurrent(p, in.Data(), state, out);
  return out;
}

// max |a - b| (both the same size).
inline double MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double{a[i]} - double{b[i]}));
  return m;
}

// Tokens [begin, end) of a sequence's inputs.
inline GdnSeqInputs SliceTokens(const GatedDeltaRuleParams& p, const GdnSeqInputs& in,
                                int64_t begin, int64_t end) {
  const int64_t qk = int64_t{p.num_k_heads} * p.head_k_dim;
  const int64_t vw = int64_t{p.num_v_heads} * p.head_v_dim;
  auto cut = [&](const std::vector<float>& x, int64_t width) {
    return std::vector<float>(x.begin() + begin * width, x.begin() + end * width);
  };
  return GdnSeqInputs{cut(in.q, qk),
                      cut(in.k, qk),
                      cut(in.v, vw),
                      cut(in.g, p.num_v_heads),
                      cut(in.beta, p.num_v_heads),
                      end - begin};
}

}  // namespace tessera::kernels::cpu::testing
