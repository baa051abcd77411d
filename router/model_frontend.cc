#include "router/model_frontend.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/safetensors/model_file.h"

namespace tessera::router {

absl::StatusOr<std::unique_ptr<ModelFrontend>> LoadModelFrontend(const std::string& path) {
  auto frontend = std::make_unique<ModelFrontend>();
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = safetensors::OpenModelFile(
      path, util::FileLoad::kMap, safetensors::ModelContents::kMetadataOnly);
  if (!file.ok()) return file.status();
  frontend->file = std::move(*file);
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok =
      tokenizer::Tokenizer::FromGguf(*frontend->file);
  if (!tok.ok()) {
    return absl::Status(tok.status().code(), absl::StrCat(path, ": ", tok.status().message()));
  }
  frontend->tokenizer = std::move(*tok);
  absl::StatusOr<chat::ChatTemplate> chat_template = chat::ChatTemplate::FromGguf(*frontend->file);
  if (chat_template.ok()) {
    frontend->chat_template = std::move(*chat_template);
  } else {
    frontend->chat_template_error = std::string(chat_template.status().message());
  }
  absl::StatusOr<std::string> name = frontend->file->GetString("general.name");
  frontend->model_name =
      name.ok() ? *name : std::filesystem::path(path).filename().string();
  return frontend;
}

}  // namespace tessera::router
