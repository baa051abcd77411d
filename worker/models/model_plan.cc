#include "worker/models/model_plan.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/model/hybrid_config.h"

namespace tessera::worker {

bool IsLlamaFamily(const std::string& architecture) {
  return architecture == "llama" || architecture == "qwen2" || architecture == "qwen3";
}

bool IsServedArchitecture(const std::string& architecture) {
  return IsLlamaFamily(architecture) || model::IsHybridArchitecture(architecture);
}

absl::StatusOr<ModelPlan> PlanModel(const model::ModelConfig& config,
                                    const model::HybridTensorForms& forms) {
  ModelPlan plan;
  if (IsLlamaFamily(config.architecture)) {
    LlamaPlan llama = DeclareLlama(config, &plan.weights, &plan.activations);
    plan.head = llama.head;
    plan.logits = llama.acts.logits;
    plan.num_attention_layers = config.num_layers;
    plan.body = std::move(llama);
    return plan;
  }
  if (config.hybrid.has_value()) {
    HybridPlan hybrid = DeclareHybrid(config, forms, &plan.weights, &plan.activations);
    plan.head = hybrid.head;
    plan.logits = hybrid.acts.logits;
    plan.num_attention_layers = model::CountLayers(*config.hybrid, model::LayerKind::kAttention);
    plan.num_linear_layers = model::CountLayers(*config.hybrid, model::LayerKind::kGatedDeltaNet);
    plan.body = std::move(hybrid);
    return plan;
  }
  return absl::UnimplementedError(absl::StrCat("architecture '", config.architecture,
                                                "' is not supported (supported: ",
                                                kServedArchitectures, ")"));
}

}  // namespace tessera::worker
