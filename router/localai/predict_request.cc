#include "router/localai/predict_request.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace tessera::router::localai {

namespace v1 = ::tessera::v1;

absl::StatusOr<v1::GenerateRequest> ToGenerateRequest(const ::backend::PredictOptions& options) {
  v1::GenerateRequest request;
  if (options.usetokenizertemplate() && options.messages_size() > 0) {
    for (const ::backend::Message& message : options.messages()) {
      v1::ChatMessage* out = request.mutable_chat()->add_messages();
      out->set_role(message.role());
      out->set_content(message.content());
    }
  } else if (!options.prompt().empty()) {
    request.set_text(options.prompt());
  } else {
    return absl::InvalidArgumentError(
        "Prompt is empty (and no Messages with UseTokenizerTemplate): nothing to complete");
  }
  if (options.tokens() > 0) request.set_max_tokens(static_cast<uint32_t>(options.tokens()));
  v1::SamplingParams& sampling = *request.mutable_sampling();
  sampling.set_temperature(options.temperature());
  if (options.topk() > 0) sampling.set_top_k(options.topk());
  if (options.topp() > 0) sampling.set_top_p(options.topp());
  if (options.minp() > 0) sampling.set_min_p(options.minp());
  if (options.penalty() > 0) sampling.set_repetition_penalty(options.penalty());
  if (options.frequencypenalty() != 0) sampling.set_frequency_penalty(options.frequencypenalty());
  if (options.presencepenalty() != 0) sampling.set_presence_penalty(options.presencepenalty());
  if (options.seed() >= 0) sampling.set_seed(static_cast<uint64_t>(options.seed()));
  for (const std::string& stop : options.stopprompts()) {
    if (!stop.empty()) request.add_stop(stop);
  }
  request.set_ignore_eos(options.ignoreeos());
  request.set_skip_special_tokens(true);
  return request;
}

absl::StatusOr<std::string> ModelFileOf(const ::backend::ModelOptions& options) {
  if (!options.modelfile().empty()) return options.modelfile();
  if (options.model().empty()) {
    return absl::InvalidArgumentError(
        "ModelOptions names no model (ModelFile and Model are empty)");
  }
  if (!options.modelpath().empty()) {
    return (std::filesystem::path(options.modelpath()) / options.model()).string();
  }
  return options.model();
}

absl::StatusOr<std::string> CanonicalModelFile(const ::backend::ModelOptions& options) {
  absl::StatusOr<std::string> file = ModelFileOf(options);
  if (!file.ok()) return file.status();
  std::error_code error;
  const std::filesystem::path canonical = std::filesystem::canonical(*file, error);
  if (error) {
    const std::string message = absl::StrCat("model file ", *file, ": ", error.message());
    return error == std::errc::no_such_file_or_directory ? absl::NotFoundError(message)
                                                         : absl::InvalidArgumentError(message);
  }
  if (!std::filesystem::is_regular_file(canonical, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file ", *file, " is not a regular file: not a GGUF model"));
  }
  return canonical.string();
}

}  // namespace tessera::router::localai
