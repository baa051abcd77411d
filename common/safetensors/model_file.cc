#include "common/safetensors/model_file.h"

#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/safetensors/hf_directory.h"
#include "common/safetensors/hf_gguf_view.h"

namespace tessera::safetensors {

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> OpenModelFile(const std::string& path,
                                                              util::FileLoad load,
                                                              ModelContents contents) {
  if (IsHfModelDirectory(path)) {
    return OpenHfDirectoryAsGguf(path, load, contents == ModelContents::kAll);
  }
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::NotFoundError(absl::StrCat("'", path, "' is a directory without ", kConfigFile,
                                            " (not a Hugging Face model directory)"));
  }
  return gguf::GgufFile::Open(path, load);
}

}  // namespace tessera::safetensors
