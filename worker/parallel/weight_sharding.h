// Megatron-style sharding of a model for tensor parallelism (DESIGN.md §12): what each of `tp`
// ranks runs and holds.
//
// A rank runs the same model definition on a config with 1/tp of the attention heads, of the KV
// heads and of the FFN width (ShardModelConfig); the plan that config declares gives every
// weight's per-rank shape, and the rank's weights are cut from the loaded model by comparing the
// two declarations, tensor by tensor (ShardWeights):
//   - a matrix whose rows shrank is column-parallel (q, k, v, gate, up): the rank's consecutive
//     rows, a view into the loaded weight (any format, no copy);
//   - a matrix whose columns shrank is row-parallel (attention output, down): the rank's columns
//     of every row, copied in the file's format when the cut falls on block boundaries, else
//     dequantized to f32; marked partial_sum, so the backend's Project sums it over the ranks;
//   - an expert stack likewise, expert by expert: gate and up (each half of the fused [gate | up]
//     form) by rows, down by columns (partial_sum: the MoE layer sums its combined output);
//   - a vector that shrank (the q/k/v biases) is the rank's consecutive slice;
//   - everything else is replicated: the embedding table, the output head (so every rank
//     computes the full logits and samples the same token), the norms, per-head q/k norms.
// The KV pool is sharded by KV head by construction: each rank's config has 1/tp of them.
// Hybrid models (Gated DeltaNet + gated attention, dense or MoE FFN) shard their FFN only — the
// dense FFN's columns, or every expert's and the shared expert's — and replicate the mixers
// (and so their KV pool and recurrent state) on every rank, for now.
//
// Loader's thread; the results are plain data.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/models/host_model_weights.h"
#include "worker/models/model_plan.h"

namespace tessera::worker {

// `config` with heads, KV heads and FFN width divided by tp (a hybrid: its FFN or expert widths
// only). INVALID_ARGUMENT, one line, naming what does not divide.
absl::StatusOr<model::ModelConfig> ShardModelConfig(const model::ModelConfig& config, int tp);

// Rank `rank` of `tp`'s weights for `rank_declaration` (the plan of ShardModelConfig's config),
// cut from `weights` (bound against `full`). Views point into `weights` (which must outlive the
// result) or into the result's own copies.
absl::StatusOr<std::unique_ptr<HostModelWeights>> ShardWeights(
    const WeightDeclaration& full, const HostModelWeights& weights,
    const WeightDeclaration& rank_declaration, int rank, int tp);

}  // namespace tessera::worker
