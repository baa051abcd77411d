#include "router/openai/openai_handlers.h"

#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "router/completion_job.h"
#include "common/util/bearer_token.h"
#include "router/openai/completion_stream.h"
#include "router/openai/openai_response.h"
#include "router/request_builder.h"

namespace tessera::router::openai {
namespace {

namespace v1 = ::tessera::v1;
using Json = nlohmann::json;

http::Response JsonResponse(int status, const Json& body) {
  http::Response response;
  response.status = status;
  response.content_type = kJsonContentType;
  response.body = Dump(body);
  return response;
}

void SendJson(http::Responder& responder, int status, const Json& body) {
  responder.Send(JsonResponse(status, body));
}

void SendError(http::Responder& responder, const absl::Status& status) {
  SendJson(responder, HttpStatusOf(status), ErrorBody(status));
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "structured.json_schema is invalid: ..." names the request's own field instead
// ("response_format is invalid: ...").
absl::Status NamingTheStructuredField(const absl::Status& status, const std::string& field) {
  const absl::string_view message = status.message();
  if (field.empty() || !absl::StartsWith(message, "structured.")) return status;
  const size_t space = message.find(' ');
  if (space == absl::string_view::npos) return status;
  return absl::Status(status.code(), absl::StrCat(field, message.substr(space)));
}

// The prompt as `echo` returns it: a text prompt as sent, token ids decoded.
std::string EchoText(const v1::GenerateRequest& request, const tokenizer::Tokenizer& tokenizer) {
  if (request.has_token_ids()) {
    absl::StatusOr<std::string> text = tokenizer.Decode(
        std::span<const int32_t>(request.token_ids().ids().data(),
                                 static_cast<size_t>(request.token_ids().ids_size())),
        {});
    return text.ok() ? *text : "";
  }
  return request.text();
}

absl::StatusOr<ModelLimits> LimitsOf(const RequestEngine& engine) {
  std::optional<wv1::DescribeResponse> worker = engine.worker();
  if (!worker.has_value())
    return absl::UnavailableError("no worker has connected yet; retry later");
  return LimitsOfWorker(*worker);
}

// The request's reasoning format: its chat_template_kwargs (enable_thinking=false) may close
// the think block the template's generation prompt opens.
chat::ReasoningFormat ReasoningFormatOf(const chat::ChatTemplate& chat_template,
                                        const v1::Chat& chat) {
  if (chat.template_kwargs_json().empty() ||
      chat_template.reasoning_format() != chat::ReasoningFormat::kStartsInThinking) {
    return chat_template.reasoning_format();
  }
  const nlohmann::ordered_json kwargs = nlohmann::ordered_json::parse(
      chat.template_kwargs_json(), nullptr, /*allow_exceptions=*/false);
  if (!kwargs.is_object()) return chat_template.reasoning_format();
  return chat_template.ReasoningFormatFor({.template_kwargs = &kwargs});
}

}  // namespace

OpenAiHandlers::OpenAiHandlers(RequestEngine* engine, const ModelFrontend* model,
                               std::string api_key)
    : engine_(engine),
      model_(model),
      api_key_(std::move(api_key)),
      created_(UnixSeconds()),
      seed_source_(std::random_device{}()) {}

std::optional<http::Response> OpenAiHandlers::Admit(const http::Request& head) const {
  if (util::BearerMatches(head.Header("Authorization").value_or(""), api_key_)) {
    return std::nullopt;
  }
  http::Response refusal = JsonResponse(
      401, ErrorBody(absl::UnauthenticatedError(
               "missing or wrong API key: send 'Authorization: Bearer <key>'")));
  refusal.headers.emplace_back("WWW-Authenticate", "Bearer");
  return refusal;
}

uint64_t OpenAiHandlers::NextSeed() {
  std::lock_guard<std::mutex> lock(seed_mutex_);
  return seed_source_();
}

std::string OpenAiHandlers::NextId(Endpoint endpoint) {
  return absl::StrFormat("%s-%016x%x", endpoint == Endpoint::kChatCompletions ? "chatcmpl" : "cmpl",
                         NextSeed(), next_id_.fetch_add(1));
}

// One validated engine request per choice; choice i of a seeded request uses seed + i.
absl::StatusOr<std::vector<ValidatedRequest>> OpenAiHandlers::Admit(const OpenAiRequest& request,
                                                                    const std::string& id) {
  if (!model_->Serves(request.model)) {
    return absl::NotFoundError(absl::StrCat("model '", request.model,
                                            "' does not exist; this "
                                            "server serves '",
                                            model_->model_name, "'"));
  }
  absl::StatusOr<ModelLimits> limits = LimitsOf(*engine_);
  if (!limits.ok()) return limits.status();
  std::vector<ValidatedRequest> requests;
  for (int i = 0; i < request.n; ++i) {
    v1::GenerateRequest choice = request.generate;
    choice.set_request_id(request.n == 1 ? id : absl::StrCat(id, "-", i));
    if (choice.sampling().has_seed()) {
      choice.mutable_sampling()->set_seed(choice.sampling().seed() + i);
    }
    // Chat without max_tokens may use the rest of the context, as vLLM does (completions
    // default to 16 in openai_request.cc, as OpenAI's API does).
    absl::StatusOr<ValidatedRequest> admitted =
        BuildRequest(choice, *model_, *limits, NextSeed(),
                     request.endpoint == Endpoint::kChatCompletions
                         ? MaxTokensDefault::kRestOfContext
                         : MaxTokensDefault::kCapped);
    if (!admitted.ok()) {
      return NamingTheStructuredField(admitted.status(), request.structured_field);
    }
    requests.push_back(*std::move(admitted));
  }
  return requests;
}

void OpenAiHandlers::Completions(const http::Request& request, http::Responder& responder) {
  Generate(Endpoint::kCompletions, request, responder);
}

void OpenAiHandlers::ChatCompletions(const http::Request& request,
                                     http::Responder& responder) {
  Generate(Endpoint::kChatCompletions, request, responder);
}

void OpenAiHandlers::Generate(Endpoint endpoint, const http::Request& request,
                              http::Responder& responder) {
  absl::StatusOr<OpenAiRequest> parsed = ParseGenerationRequest(endpoint, request.body);
  if (!parsed.ok()) return SendError(responder, parsed.status());
  const std::string id = NextId(endpoint);
  absl::StatusOr<std::vector<ValidatedRequest>> admitted = Admit(*parsed, id);
  if (!admitted.ok()) return SendError(responder, admitted.status());
  std::shared_ptr<CompletionJob> job = CompletionJob::Submit(engine_, *std::move(admitted));
  const chat::ReasoningFormat reasoning =
      endpoint == Endpoint::kChatCompletions && model_->chat_template.has_value()
          ? ReasoningFormatOf(*model_->chat_template, parsed->generate.chat())
          : chat::ReasoningFormat::kNone;
  // Tool calls are looked for only when the request offered tools to the template (in its
  // format) or forced a call (the grammar's JSON).
  ToolCallMode tool_calls;
  if (parsed->forced_tool.has_value()) {
    tool_calls = {.forced = true, .forced_function = parsed->forced_tool->function};
  } else if (endpoint == Endpoint::kChatCompletions && model_->chat_template.has_value() &&
             !parsed->generate.chat().tools_json().empty()) {
    tool_calls.format = model_->chat_template->tool_call_format();
    tool_calls.tools_json = parsed->generate.chat().tools_json();
  }
  if (!parsed->parallel_tool_calls) tool_calls.max_calls = 1;
  auto encoder = std::make_unique<ResponseEncoder>(endpoint, id, model_->model_name, UnixSeconds(),
                                                   model_->tokenizer.get(), parsed->logprobs,
                                                   parsed->include_usage, reasoning, tool_calls);
  if (parsed->echo) encoder->set_echo(EchoText(parsed->generate, *model_->tokenizer));
  if (!parsed->stream) {
    absl::StatusOr<Json> body = CollectCompletion(*job, *encoder, parsed->n, responder);
    if (!body.ok()) return SendError(responder, body.status());
    return SendJson(responder, 200, *body);
  }
  CompletionStream stream(job, std::move(encoder), parsed->n, parsed->include_usage);
  if (absl::Status started = stream.AwaitStart(responder); !started.ok()) {
    return SendError(responder, started);
  }
  stream.Run(responder);
}

void OpenAiHandlers::Models(const http::Request&, http::Responder& responder) {
  SendJson(responder, 200,
           {{"object", "list"},
            {"data", Json::array({{{"id", model_->model_name},
                                   {"object", "model"},
                                   {"created", created_},
                                   {"owned_by", "tessera"}}})}});
}

void OpenAiHandlers::Health(const http::Request&, http::Responder& responder) {
  if (engine_->serving()) return SendJson(responder, 200, Json::object());
  SendError(responder, engine_->stats().worker_connected
                           ? absl::UnavailableError("the router is draining")
                           : absl::UnavailableError("no worker is connected"));
}

void OpenAiHandlers::Tokenize(const http::Request& request, http::Responder& responder) {
  absl::StatusOr<v1::TokenizeRequest> parsed = ParseTokenizeRequest(request.body);
  if (!parsed.ok()) return SendError(responder, parsed.status());
  absl::StatusOr<std::vector<int32_t>> ids =
      parsed->has_chat() ? TokenizeChat(parsed->chat(), *model_)
                         : TokenizeText(parsed->text(), parsed->add_special_tokens(), *model_);
  if (!ids.ok()) return SendError(responder, ids.status());
  Json body = {{"count", ids->size()}, {"tokens", *ids}};
  if (absl::StatusOr<ModelLimits> limits = LimitsOf(*engine_); limits.ok()) {
    body["max_model_len"] = limits->max_context;
  }
  SendJson(responder, 200, body);
}

void OpenAiHandlers::Detokenize(const http::Request& request, http::Responder& responder) {
  absl::StatusOr<std::vector<int32_t>> ids = ParseDetokenizeRequest(request.body);
  if (!ids.ok()) return SendError(responder, ids.status());
  absl::StatusOr<std::string> text = model_->tokenizer->Decode(*ids, {});
  if (!text.ok()) {
    return SendError(responder,
                     absl::InvalidArgumentError(absl::StrCat("tokens ", text.status().message())));
  }
  SendJson(responder, 200, {{"prompt", *text}});
}

}  // namespace tessera::router::openai
