// The model path every tool takes (`--model`, `tessera inspect MODEL`): a GGUF file, or a Hugging
// Face safetensors directory (a directory holding config.json, hf_gguf_view.h), opened as a
// gguf::GgufFile either way so that the readers downstream need not know which. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/util/mapped_file.h"

namespace tessera::safetensors {

// The errors of OpenHfDirectoryAsGguf for a directory with config.json, NOT_FOUND for another
// directory, the errors of GgufFile::Open for anything else.
absl::StatusOr<std::unique_ptr<gguf::GgufFile>> OpenModelFile(
    const std::string& path, util::FileLoad load = util::FileLoad::kMap);

}  // namespace tessera::safetensors
