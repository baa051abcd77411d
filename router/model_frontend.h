// The router's view of the model: the tokenizer and chat template read from the model file's
// metadata (a GGUF file or a HF safetensors directory, common/safetensors/model_file.h; the router
// maps the file but never touches the weights or any device).
//
// Ownership/threading: built once at router start, immutable afterwards; shared read-only by the
// RPC handlers and the engine loop.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat/chat_template.h"
#include "common/gguf/gguf_file.h"
#include "common/tokenizer/tokenizer.h"

namespace tessera::router {

struct ModelFrontend {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::optional<chat::ChatTemplate> chat_template;
  std::string chat_template_error;  // why chat_template is absent ("" when present)
  // The name the server answers with (/v1/models, responses, ModelInfo): the first
  // --served-model-name, else the model's file name without `.gguf` (a directory's name).
  std::string model_name;
  // Other names a request may use: the other --served-model-name values, and general.name when
  // no name was given (so clients that used it before keep working).
  std::vector<std::string> model_aliases;

  // Whether a request naming `name` is for this model ("" names none: any model).
  bool Serves(std::string_view name) const {
    return name.empty() || name == model_name ||
           std::find(model_aliases.begin(), model_aliases.end(), name) != model_aliases.end();
  }
};

// Errors name the path and the problem (unreadable file, unsupported tokenizer). A missing or
// unsupported chat template is not an error: chat requests are refused with the reason instead.
// `chat_template_path` (--chat-template) replaces the model's own template with the Jinja file's;
// there an unreadable file or a template that does not parse IS an error (the operator asked
// for it), naming the file. `served_names` (--served-model-name): see ModelFrontend::model_name.
absl::StatusOr<std::unique_ptr<ModelFrontend>> LoadModelFrontend(
    const std::string& path, const std::string& chat_template_path = "",
    const std::vector<std::string>& served_names = {});

}  // namespace tessera::router
