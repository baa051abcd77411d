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

// What the caller will read. kMetadataOnly (the router, `tessera tokenize`: tokenizer, chat
// template, name): a HF directory then presents no tensors, so nothing is copied or dequantized
// for a reader that never touches the weights; a GGUF file is mapped either way (a mapping costs
// nothing until read).
enum class ModelContents { kAll, kMetadataOnly };

// The errors of OpenHfDirectoryAsGguf for a directory with config.json, NOT_FOUND for another
// directory, the errors of GgufFile::Open for anything else.
absl::StatusOr<std::unique_ptr<gguf::GgufFile>> OpenModelFile(
    const std::string& path, util::FileLoad load = util::FileLoad::kMap,
    ModelContents contents = ModelContents::kAll);

}  // namespace tessera::safetensors
