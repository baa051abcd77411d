// A model file opened for execution: the mapped GGUF, its hyper-parameters and its weights.
// Immutable after LoadModel; the runner borrows weights from it, so it must outlive the runner.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/model_config.h"
#include "worker/cpu/llama_weights.h"

namespace tessera::worker {

struct LoadedModel {
  std::unique_ptr<gguf::GgufFile> file;
  model::ModelConfig config;
  std::unique_ptr<LlamaWeights> weights;
};

// Errors name the path and the problem (bad file, unsupported architecture, missing tensor).
// The default copies the file into huge-page memory (faster steps, see util::FileLoad); kMap
// maps it instead (for models that must share the page cache or exceed free memory).
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(
    const std::string& path, util::FileLoad load = util::FileLoad::kHugePageCopy);

}  // namespace tessera::worker
