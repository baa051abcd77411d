#include "router/model_frontend.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/safetensors/model_file.h"

namespace tessera::router {

namespace {

absl::StatusOr<chat::ChatTemplate> TemplateFromFile(const std::string& path,
                                                    const gguf::GgufFile& model) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--chat-template ", path, ": cannot read it"));
  std::ostringstream source;
  source << in.rdbuf();
  absl::StatusOr<chat::ChatTemplate> parsed =
      chat::ChatTemplate::FromSource(source.str(), chat::ChatTemplate::TokensOf(model));
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chat-template ", path, ": ", parsed.status().message()));
  }
  return parsed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelFrontend>> LoadModelFrontend(
    const std::string& path, const std::string& chat_template_path) {
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
  if (!chat_template_path.empty()) {
    absl::StatusOr<chat::ChatTemplate> chosen =
        TemplateFromFile(chat_template_path, *frontend->file);
    if (!chosen.ok()) return chosen.status();
    frontend->chat_template = std::move(*chosen);
  }
  absl::StatusOr<chat::ChatTemplate> chat_template =
      frontend->chat_template.has_value() ? std::move(*frontend->chat_template)
                                          : chat::ChatTemplate::FromGguf(*frontend->file);
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
