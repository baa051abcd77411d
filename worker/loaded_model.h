// A model opened for execution: the mapped GGUF (or a Hugging Face safetensors directory read as
// one, common/safetensors/model_file.h), its hyper-parameters, its plan (the model
// definition the config selects: worker/models/model_plan.h) and its weights bound for the cpu
// kernels. Immutable after LoadModel; runners borrow the plan and the weights, so it must
// outlive them.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/model_config.h"
#include "worker/models/host_model_weights.h"
#include "worker/models/model_plan.h"

namespace tessera::worker {

struct LoadedModel {
  std::unique_ptr<gguf::GgufFile> file;
  model::ModelConfig config;
  ModelPlan plan;
  std::unique_ptr<HostModelWeights> weights;
};

// `path` is a GGUF file or a HF safetensors directory. Errors name the path and the problem (bad
// file, unsupported architecture, missing tensor). The default copies the file(s) into huge-page
// memory (faster steps, see util::FileLoad); kMap
// maps it instead (for models that must share the page cache or exceed free memory).
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(
    const std::string& path, util::FileLoad load = util::FileLoad::kHugePageCopy);

}  // namespace tessera::worker
