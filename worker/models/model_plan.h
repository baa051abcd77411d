// A model as the backends run it (DESIGN.md §5): what it reads (WeightDeclaration), what it
// writes (ActivationTable), its properties (attention layers for the KV pool, linear layers for
// recurrent state, prefix sharing) and its forward function. PlanModel picks the model definition
// from the config; no backend or worker code tests an architecture name.
//
// Plain data, built once at load; read-only afterwards (any thread).
#pragma once

#include <variant>

#include "absl/status/statusor.h"
#include "common/model/hybrid_tensors.h"
#include "common/model/model_config.h"
#include "worker/models/activation_table.h"
#include "worker/models/hybrid_model.h"
#include "worker/models/llama_model.h"
#include "worker/models/weight_declaration.h"

namespace tessera::worker {

struct ModelPlan {
  WeightDeclaration weights;
  ActivationTable activations;
  ModelHeadIds head;
  ActId logits = kNoAct;
  int num_attention_layers = 0;  // layers with a paged KV pool
  int num_linear_layers = 0;     // layers with a per-sequence recurrent state (GDN)
  std::variant<LlamaPlan, HybridPlan> body;
};

// True for architectures DeclareLlama serves ("llama", "qwen2", "qwen3").
bool IsLlamaFamily(const std::string& architecture);

// The GGUF `general.architecture` values some model definition serves, comma-separated.
inline constexpr char kServedArchitectures[] =
    "llama, qwen2, qwen3, qwen3next, qwen35, qwen35moe";
// True when `architecture` is one of kServedArchitectures.
bool IsServedArchitecture(const std::string& architecture);

// UNIMPLEMENTED naming the architecture when no model definition serves it (or a storage form the
// definition does not run yet). `forms` matters for hybrids only (CheckHybridTensors' result).
absl::StatusOr<ModelPlan> PlanModel(const model::ModelConfig& config,
                                    const model::HybridTensorForms& forms = {});

// One forward step on `ops` (the backend prepared its batch); the logits of the sampling rows
// end in plan.logits.
template <class Ops>
void RunForward(const ModelPlan& plan, const model::ModelConfig& config, Ops& ops) {
  if (const auto* llama = std::get_if<LlamaPlan>(&plan.body)) {
    LlamaForward(ops, config, *llama);
  } else {
    HybridForward(ops, config, std::get<HybridPlan>(plan.body));
  }
}

}  // namespace tessera::worker
