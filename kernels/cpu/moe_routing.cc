#include "kernels/cpu/moe_routing.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/util/check.h"
#include "kernels/cpu/softmax.h"

namespace tessera::kernels::cpu {
namespace {

// True when an expert of probability p, examined after one of probability q (so with a higher
// index), ranks before it: strictly more probable, or a number against a NaN.
bool RanksBefore(float p, float q) { return p > q || (std::isnan(q) && !std::isnan(p)); }

}  // namespace

void CheckMoeRoutingConfig(const MoeRoutingConfig& config) {
  TESSERA_CHECK(config.num_experts >= 1, "MoE routing: num_experts must be >= 1");
  TESSERA_CHECK(config.num_experts_used >= 1 && config.num_experts_used <= config.num_experts,
                "MoE routing: num_experts_used must be in [1, num_experts]");
}

void SelectTopExperts(std::span<const float> probs, int k, bool normalize_weights,
                      std::span<int32_t> ids, std::span<float> weights) {
  const int64_t num_experts = static_cast<int64_t>(probs.size());
  TESSERA_CHECK(k >= 1 && k <= num_experts, "SelectTopExperts: k must be in [1, probs.size()]");
  TESSERA_CHECK(static_cast<int64_t>(ids.size()) >= k && static_cast<int64_t>(weights.size()) >= k,
                "SelectTopExperts: ids and weights need k entries");
  // Insertion into the sorted top list, experts in increasing index: an expert goes after every
  // listed one it does not strictly beat, so ties keep the lower index first.
  int count = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    const float p = probs[e];
    int pos = count;
    while (pos > 0 && RanksBefore(p, probs[ids[pos - 1]])) --pos;
    if (pos >= k) continue;
    const int last = count < k ? count : k - 1;  // the entry at k - 1 falls off a full list
    for (int j = last; j > pos; --j) ids[j] = ids[j - 1];
    ids[pos] = static_cast<int32_t>(e);
    if (count < k) ++count;
  }
  double sum = 0.0;
  for (int r = 0; r < k; ++r) sum += probs[ids[r]];
  for (int r = 0; r < k; ++r) {
    weights[r] = normalize_weights ? static_cast<float>(probs[ids[r]] / sum) : probs[ids[r]];
  }
}

void RouteTokens(const MoeRoutingConfig& config, std::span<float> logits, int64_t num_tokens,
                 std::span<int32_t> expert_ids, std::span<float> weights, Isa isa) {
  CheckMoeRoutingConfig(config);
  const int64_t e = config.num_experts;
  const int k = config.num_experts_used;
  TESSERA_CHECK(num_tokens >= 0, "RouteTokens: negative num_tokens");
  TESSERA_CHECK(static_cast<int64_t>(logits.size()) >= num_tokens * e,
                "RouteTokens: logits smaller than [num_tokens, num_experts]");
  TESSERA_CHECK(static_cast<int64_t>(expert_ids.size()) >= num_tokens * k &&
                    static_cast<int64_t>(weights.size()) >= num_tokens * k,
                "RouteTokens: expert_ids or weights smaller than [num_tokens, k]");
  for (int64_t t = 0; t < num_tokens; ++t) {
    const std::span<float> row = logits.subspan(t * e, e);
    SoftmaxInPlace(row, isa);
    SelectTopExperts(row, k, config.normalize_weights, expert_ids.subspan(t * k, k),
                     weights.subspan(t * k, k));
  }
}

void GroupByExpert(std::span<const int32_t> expert_ids, int64_t num_tokens, int k, int num_experts,
                   ExpertGroups* groups) {
  TESSERA_CHECK(num_experts >= 1 && k >= 1, "GroupByExpert: num_experts and k must be >= 1");
  TESSERA_CHECK(num_tokens >= 0 && static_cast<int64_t>(expert_ids.size()) >= num_tokens * k,
                "GroupByExpert: expert_ids smaller than [num_tokens, k]");
  const int64_t num_slots = num_tokens * k;
  TESSERA_CHECK(num_slots <= std::numeric_limits<int32_t>::max(),
                "GroupByExpert: num_tokens * k must fit in int32");
  groups->offsets.assign(static_cast<size_t>(num_experts) + 1, 0);
  groups->row_tokens.resize(static_cast<size_t>(num_slots));
  groups->slot_rows.resize(static_cast<size_t>(num_slots));
  // Counting sort: counts, exclusive prefix sums, then a stable placement in slot order (token
  // order), so each group lists its tokens in increasing order.
  std::vector<int32_t>& offsets = groups->offsets;
  for (int64_t s = 0; s < num_slots; ++s) {
    const int32_t id = expert_ids[s];
    TESSERA_CHECK(id >= 0 && id < num_experts, "GroupByExpert: expert id out of range");
    ++offsets[id + 1];
  }
  for (int e = 0; e < num_experts; ++e) offsets[e + 1] += offsets[e];
  // offsets[e] is used as expert e's fill cursor, then restored from its neighbour.
  for (int64_t s = 0; s < num_slots; ++s) {
    const int32_t row = offsets[expert_ids[s]]++;
    groups->row_tokens[row] = static_cast<int32_t>(s / k);
    groups->slot_rows[s] = row;
  }
  for (int e = num_experts; e > 0; --e) offsets[e] = offsets[e - 1];
  offsets[0] = 0;
}

}  // namespace tessera::kernels::cpu
