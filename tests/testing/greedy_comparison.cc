#include "tests/testing/greedy_comparison.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace tessera::testing_util {
namespace {

// The reference's logprob of `token` at a position, if it is among its top tokens.
const float* ReferenceLogprobOf(const GreedyToken& reference, int32_t token) {
  for (const auto& [id, logprob] : reference.top) {
    if (id == token) return &logprob;
  }
  return nullptr;
}

// Whether the candidate may pick `candidate.token_id` where the reference picked another token
// at a position whose top-2 margin is `margin`; "" if it may, else why not.
std::string CheckDivergence(const GreedyToken& reference, const GreedyToken& candidate,
                            float margin, const GreedyTolerance& tolerance) {
  std::ostringstream why;
  if (margin > tolerance.margin) {
    why << "token " << candidate.token_id << " instead of " << reference.token_id
        << " where the reference's top-2 margin is " << margin << " > " << tolerance.margin;
    return why.str();
  }
  const float* logprob = ReferenceLogprobOf(reference, candidate.token_id);
  if (logprob == nullptr || reference.top.front().second - *logprob > tolerance.margin) {
    why << "token " << candidate.token_id << " instead of " << reference.token_id
        << ", which the reference does not rank within " << tolerance.margin << " of its top-1";
    return why.str();
  }
  if (std::abs(candidate.logprob - *logprob) > tolerance.logprob) {
    why << "token " << candidate.token_id << " has logprob " << candidate.logprob
        << ", the reference " << *logprob << " (tolerance " << tolerance.logprob << ")";
    return why.str();
  }
  return "";
}

}  // namespace

GreedyComparison CompareGreedyRuns(std::span<const GreedyToken> reference,
                                   std::span<const GreedyToken> candidate,
                                   const GreedyTolerance& tolerance) {
  GreedyComparison result;
  result.min_margin = std::numeric_limits<float>::infinity();
  auto fail = [&result](size_t position, const std::string& why) {
    result.mismatch = "position " + std::to_string(position) + ": " + why;
    return result;
  };
  const size_t common = std::min(reference.size(), candidate.size());
  for (size_t t = 0; t < common; ++t) {
    const GreedyToken& want = reference[t];
    const GreedyToken& got = candidate[t];
    if (want.top.size() < 2) return fail(t, "the reference has no top-2 logprobs");
    const float margin = want.top[0].second - want.top[1].second;
    result.min_margin = std::min(result.min_margin, margin);
    ++result.compared;
    if (got.token_id != want.token_id) {
      const std::string why = CheckDivergence(want, got, margin, tolerance);
      if (!why.empty()) return fail(t, why);
      result.diverged_at = static_cast<int>(t);
      return result;  // different prefixes from here on: nothing more to compare
    }
    const float diff = std::abs(got.logprob - want.logprob);
    result.max_logprob_diff = std::max(result.max_logprob_diff, diff);
    if (!(diff <= tolerance.logprob)) {  // NaN fails too
      std::ostringstream why;
      why << "token " << got.token_id << " has logprob " << got.logprob << ", the reference "
          << want.logprob << " (tolerance " << tolerance.logprob << ")";
      return fail(t, why.str());
    }
  }
  if (reference.size() != candidate.size()) {
    return fail(common, "the reference has " + std::to_string(reference.size()) +
                            " tokens, the candidate " + std::to_string(candidate.size()));
  }
  return result;
}

}  // namespace tessera::testing_util
