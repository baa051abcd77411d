#include "worker/loaded_model.h"

#include "absl/strings/str_cat.h"
#include "common/model/hybrid_tensors.h"
#include "common/safetensors/model_file.h"

namespace tessera::worker {
namespace {

absl::Status WithPath(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const std::string& path,
                                                       util::FileLoad load) {
  auto model = std::make_unique<LoadedModel>();
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = safetensors::OpenModelFile(path, load);
  if (!file.ok()) return file.status();
  model->file = std::move(*file);
  absl::StatusOr<model::ModelConfig> config = model::ReadModelConfig(*model->file);
  if (!config.ok()) return WithPath(path, config.status());
  model::HybridTensorForms forms;
  if (config->hybrid.has_value()) {  // every tensor of the declared layout, named when wrong
    absl::StatusOr<model::HybridTensorForms> checked =
        model::CheckHybridTensors(*model->file, *config);
    if (!checked.ok()) return WithPath(path, checked.status());
    forms = *checked;
  }
  model->config = *config;
  absl::StatusOr<ModelPlan> plan = PlanModel(model->config, forms);
  if (!plan.ok()) return WithPath(path, plan.status());
  model->plan = *std::move(plan);
  absl::StatusOr<std::unique_ptr<HostModelWeights>> weights =
      BindHostWeights(*model->file, model->plan.weights);
  if (!weights.ok()) return WithPath(path, weights.status());
  model->weights = std::move(*weights);
  return model;
}

}  // namespace tessera::worker
