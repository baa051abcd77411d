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

// "models/SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct.Q4_1"; a safetensors
// directory "models/Qwen2.5-7B/" -> "Qwen2.5-7B" (its dots are part of the name).
std::string FileStem(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // a trailing slash
  std::string name = p.filename().string();
  constexpr std::string_view kGguf = ".gguf";
  if (name.size() > kGguf.size() && name.ends_with(kGguf)) name.resize(name.size() - kGguf.size());
  return name;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelFrontend>> LoadModelFrontend(
    const std::string& path, const std::string& chat_template_path,
    const std::vector<std::string>& served_names) {
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
  if (!served_names.empty()) {
    frontend->model_name = served_names.front();
    frontend->model_aliases.assign(served_names.begin() + 1, served_names.end());
    return frontend;
  }
  frontend->model_name = FileStem(path);
  absl::StatusOr<std::string> name = frontend->file->GetString("general.name");
  if (name.ok() && *name != frontend->model_name) frontend->model_aliases.push_back(*name);
  return frontend;
}

}  // namespace tessera::router
