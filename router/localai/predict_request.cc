#include "router/localai/predict_request.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/util/client_json.h"
#include "router/logit_bias_json.h"

namespace tessera::router::localai {

namespace v1 = ::tessera::v1;

namespace {

// ToolChoice as LocalAI sends it: a bare word, the JSON string of one, or a JSON object naming a
// function. Whether the tools go to the template: all but "none" (a forced call's constraint is
// the Grammar LocalAI sends with it).
bool OffersTools(std::string choice) {
  if (choice.size() >= 2 && choice.front() == '"' && choice.back() == '"') {
    choice = choice.substr(1, choice.size() - 2);
  }
  return choice != "none";
}

absl::Status SetChat(const ::backend::PredictOptions& options, v1::Chat* chat) {
  for (const ::backend::Message& message : options.messages()) {
    v1::ChatMessage* out = chat->add_messages();
    out->set_role(message.role());
    out->set_content(message.content());
    out->set_name(message.name());
    out->set_tool_call_id(message.tool_call_id());
    out->set_reasoning_content(message.reasoning_content());
    out->set_tool_calls_json(message.tool_calls());
  }
  if (OffersTools(options.toolchoice())) {
    chat->set_tools_json(options.tools());  // checked as JSON when the chat renders
  }
  return absl::OkStatus();
}

// LogitBias: a JSON object of token id -> bias, as OpenAI's logit_bias (ranges are checked when
// the request is built).
absl::Status SetLogitBias(const std::string& text, v1::GenerateRequest& request) {
  absl::StatusOr<nlohmann::json> json = util::ParseClientJson(text, "LogitBias");
  if (!json.ok()) return json.status();
  return SetLogitBiasFromJson(*json, "LogitBias", &request);
}

// Logprobs / TopLogprobs (proto/localai/backend.proto fields 50, 51): either > 0 turns logprobs
// on; TopLogprobs alternatives per token, Logprobs when TopLogprobs is 0 (LocalAI sends both
// equal). The upper bound is the worker's, checked when the request is built.
absl::Status SetLogprobs(const ::backend::PredictOptions& options, v1::GenerateRequest& request) {
  if (options.logprobs() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Logprobs must be >= 0 (0 = none), got ", options.logprobs()));
  }
  if (options.toplogprobs() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TopLogprobs must be >= 0 (0 = none), got ", options.toplogprobs()));
  }
  if (options.logprobs() == 0 && options.toplogprobs() == 0) return absl::OkStatus();
  request.set_logprobs(true);
  request.set_top_logprobs(static_cast<uint32_t>(
      options.toplogprobs() > 0 ? options.toplogprobs() : options.logprobs()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::GenerateRequest> ToGenerateRequest(const ::backend::PredictOptions& options) {
  v1::GenerateRequest request;
  if (options.usetokenizertemplate() && options.messages_size() > 0) {
    if (absl::Status s = SetChat(options, request.mutable_chat()); !s.ok()) return s;
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
  if (!options.grammar().empty()) request.mutable_structured()->set_grammar(options.grammar());
  if (!options.logitbias().empty()) {
    if (absl::Status s = SetLogitBias(options.logitbias(), request); !s.ok()) return s;
  }
  if (absl::Status s = SetLogprobs(options, request); !s.ok()) return s;
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
