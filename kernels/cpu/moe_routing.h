// Mixture-of-experts routing (Qwen3-Next / Qwen3.5-MoE / Qwen3-MoE softmax gating): per token,
// router logits [num_experts] → softmax in f32 → the k most probable experts → their
// probabilities, renormalised to sum 1 when `normalize_weights` (HF `norm_topk_prob`, llama.cpp
// `expert_weights_norm`); then the grouping of the (token, rank) assignments by expert, so that
// each expert's projections run once over the contiguous group of its rows (moe_ffn.h).
//
// Fixed choices, so that every backend routes a token the same way:
// - Top-k order: probability descending; equal probabilities go to the LOWER expert index first
//   (torch.topk leaves ties unspecified). A token's rank order fixes the order in which its
//   experts' outputs are added (moe_ffn.h).
// - Renormalisation: w_r = p_r / Σ p, the sum in f64 over the ranks in order, the quotient
//   rounded once to f32. (llama.cpp clamps the sum at 2^-14; a softmax top-k sum is at least
//   k / num_experts, so the clamp never acts for these models and is left out.)
// - The softmax is SoftmaxInPlace (softmax.h): same bits on kAvx2 and kAvx512.
// A token's routing depends on its own logits only, so routing is batch invariant.
//
// All functions are stateless and thread-safe; outputs are caller-owned (grow-only vectors, so
// steady-state steps do not allocate).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/isa.h"

namespace tessera::kernels::cpu {

struct MoeRoutingConfig {
  int num_experts = 0;            // E
  int num_experts_used = 0;       // k, 1 <= k <= E
  bool normalize_weights = true;  // renormalise the top-k probabilities to sum 1
};

// Precondition (checked): 1 <= num_experts_used <= num_experts.
void CheckMoeRoutingConfig(const MoeRoutingConfig& config);

// The top k of `probs` [E] in rank order: ids[r], weights[r] for r < k (see the header comment for
// ties and renormalisation). Exposed for tests and for backends that compute probs themselves.
// Preconditions: 1 <= k <= probs.size(); ids.size() >= k; weights.size() >= k. NaN probabilities
// rank below every number (never above a real candidate).
void SelectTopExperts(std::span<const float> probs, int k, bool normalize_weights,
                      std::span<int32_t> ids, std::span<float> weights);

// Routing of `num_tokens` tokens: logits [num_tokens, E] are replaced by their softmax (the
// probabilities stay there, for diagnostics), expert_ids and weights [num_tokens, k] get the
// top k in rank order. Single-threaded: the caller splits tokens across threads if it wants to.
// Preconditions: CheckMoeRoutingConfig; logits.size() >= num_tokens * E; expert_ids.size() and
// weights.size() >= num_tokens * k; every row of logits has a finite max (SoftmaxInPlace).
void RouteTokens(const MoeRoutingConfig& config, std::span<float> logits, int64_t num_tokens,
                 std::span<int32_t> expert_ids, std::span<float> weights, Isa isa = BestIsa());

// The assignments of a routing grouped by expert, by a stable counting sort. With n = num_tokens
// and slot s = t * k + r the assignment of token t to its rank-r expert:
//   rows [offsets[e], offsets[e + 1]) are expert e's group (empty when no token chose e), in
//   increasing token order; row_tokens[row] is the token of a grouped row; slot_rows[s] is the
//   grouped row of slot s (the inverse permutation, for the scatter back).
struct ExpertGroups {
  std::vector<int32_t> offsets;     // [E + 1], offsets[0] = 0, offsets[E] = n * k
  std::vector<int32_t> row_tokens;  // [n * k]
  std::vector<int32_t> slot_rows;   // [n * k]
};

// Preconditions: num_experts >= 1; k >= 1; expert_ids.size() >= num_tokens * k; every id in
// [0, num_experts); num_tokens * k fits in int32.
void GroupByExpert(std::span<const int32_t> expert_ids, int64_t num_tokens, int k, int num_experts,
                   ExpertGroups* groups);

}  // namespace tessera::kernels::cpu
