// Straightforward references of the mixture-of-experts kernels (moe_routing.h, moe_ffn.h), for
// tests and later for the CUDA MoE kernels (DESIGN.md §5). Token by token, f64 arithmetic on the
// weights dequantized by DequantizeRow, textbook formulas (HF transformers'
// Qwen3NextSparseMoeBlock: softmax, topk, renormalise, SwiGLU experts, sigmoid-gated shared
// expert); compare against them with a tolerance. Single-threaded and stateless.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/moe_ffn.h"
#include "kernels/cpu/moe_routing.h"

namespace tessera::kernels::cpu::reference {

// The top k of probs [E] by a stable sort on probability, descending (so ties keep the lower
// index first), and their weights: renormalised with the f64 sum over ranks in order, rounded
// once to f32 (the rule of moe_routing.h). ids and weights are resized to k.
// Preconditions: 1 <= k <= probs.size(); no NaN in probs.
void MoeSelectTopK(std::span<const float> probs, int k, bool normalize_weights,
                   std::vector<int32_t>* ids, std::vector<float>* weights);

// One token's routing from f64 logits [E]: f64 softmax, top k as MoeSelectTopK (on f64
// probabilities), f64 weights.
struct MoeTokenRoute {
  std::vector<int32_t> ids;     // [k] rank order
  std::vector<double> weights;  // [k]
};
MoeTokenRoute MoeRoute(std::span<const double> logits, int k, bool normalize_weights);

// The MoE layer, token by token in f64: out [num_tokens, hidden]. When expert_ids is not null
// it receives the routing used, [num_tokens, k].
// Preconditions: CheckMoeFfnWeights(config, weights); sizes as MoeFfn.
void MoeFfn(const MoeFfnConfig& config, const MoeFfnWeights& weights, std::span<const float> x,
            int64_t num_tokens, std::span<float> out, std::vector<int32_t>* expert_ids = nullptr);

}  // namespace tessera::kernels::cpu::reference
