#include "router/openai/openai_response.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera::router::openai {
namespace {

namespace v1 = ::tessera::v1;
using Json = nlohmann::json;

// The leading field name of an INVALID_ARGUMENT message ("top_p must be ..." -> "top_p"),
// without the public API's "sampling." prefix; "" when the message starts otherwise.
std::string ParamOf(absl::string_view message) {
  size_t end = 0;
  while (end < message.size() &&
         (absl::ascii_isalnum(message[end]) || message[end] == '_' || message[end] == '.' ||
          message[end] == '[' || message[end] == ']')) {
    ++end;
  }
  if (end == 0 || end == message.size() || message[end] != ' ') return "";
  std::string param(message.substr(0, end));
  if (absl::StartsWith(param, "sampling.")) param = param.substr(9);
  if (param.find('_') == std::string::npos && param.find('.') == std::string::npos &&
      param.find('[') == std::string::npos) {
    // One plain word: a field only if it is one we know takes that form.
    static const char* const kPlain[] = {
        "prompt", "messages", "model",  "stop",  "n",         "temperature", "seed",
        "tokens", "stream",   "echo",   "suffix", "text",     "chat",        "tools",
        "user",   "store",    "metadata", "functions", "modalities", "audio"};
    bool known = false;
    for (const char* name : kPlain) known |= param == name;
    if (!known) return "";
  }
  return param;
}

}  // namespace

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kUnimplemented:
      return 501;
    default:
      return 500;
  }
}

namespace {

// OpenAI's error `type` for an HTTP status: any other 4xx is a bad request, any other 5xx ours.
const char* ErrorTypeOf(int http) {
  switch (http) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return http < 500 ? "invalid_request_error" : "server_error";
  }
}

}  // namespace

Json HttpErrorBody(int http, std::string message) {
  return {{"error",
           {{"message", std::move(message)},
            {"type", ErrorTypeOf(http)},
            {"param", nullptr},
            {"code", nullptr}}}};
}

Json ErrorBody(const absl::Status& status) {
  const int http = HttpStatusOf(status);
  const char* type = ErrorTypeOf(http);
  // The public API's "sampling." prefix means nothing to an OpenAI client.
  std::string message(status.message());
  if (absl::StartsWith(message, "sampling.")) message = message.substr(9);
  Json error = {{"message", std::move(message)},
                {"type", type},
                {"param", nullptr},
                {"code", nullptr}};
  if (http == 400) {
    if (std::string param = ParamOf(status.message()); !param.empty()) error["param"] = param;
  }
  if (http == 404 && absl::StartsWith(status.message(), "model ")) {
    error["param"] = "model";
    error["code"] = "model_not_found";
  }
  return {{"error", std::move(error)}};
}

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string SseEvent(const Json& json) { return absl::StrCat("data: ", Dump(json), "\n\n"); }

Json FinishReason(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
    case v1::FINISH_REASON_EOS:
      return "stop";
    default:
      return nullptr;
  }
}

ResponseEncoder::ResponseEncoder(Endpoint endpoint, std::string id, std::string model,
                                 int64_t created, const tokenizer::Tokenizer* tokenizer,
                                 bool logprobs, bool include_usage,
                                 chat::ReasoningFormat reasoning, ToolCallMode tool_calls)
    : endpoint_(endpoint),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      tokenizer_(tokenizer),
      logprobs_(logprobs),
      include_usage_(include_usage),
      reasoning_(reasoning),
      tool_calls_(std::move(tool_calls)) {}

Json ResponseEncoder::Envelope(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

Json ResponseEncoder::TokenEntry(int32_t id, float logprob) const {
  absl::StatusOr<std::string> piece = tokenizer_->Decode(std::span<const int32_t>(&id, 1), {});
  const std::string text = piece.ok() ? *piece : "";
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

Json ResponseEncoder::Logprobs(const std::vector<v1::TokenLogprob>& logprobs,
                               int64_t* text_offset) const {
  if (!logprobs_) return nullptr;
  if (endpoint_ == Endpoint::kChatCompletions) {
    Json content = Json::array();
    for (const v1::TokenLogprob& token : logprobs) {
      Json entry = TokenEntry(token.token_id(), token.logprob());
      Json top = Json::array();
      for (const v1::TopLogprob& alt : token.top_logprobs()) {
        top.push_back(TokenEntry(alt.token_id(), alt.logprob()));
      }
      entry["top_logprobs"] = std::move(top);
      content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(),
       offsets = Json::array();
  for (const v1::TokenLogprob& token : logprobs) {
    Json entry = TokenEntry(token.token_id(), token.logprob());
    const std::string text = entry["token"].get<std::string>();
    tokens.push_back(text);
    token_logprobs.push_back(token.logprob());
    Json alternatives = Json::object();
    for (const v1::TopLogprob& alt : token.top_logprobs()) {
      alternatives[TokenEntry(alt.token_id(), alt.logprob())["token"].get<std::string>()] =
          alt.logprob();
    }
    top.push_back(std::move(alternatives));
    offsets.push_back(*text_offset);
    *text_offset += static_cast<int64_t>(text.size());
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

Json ResponseEncoder::Chunk(int choice, const v1::GenerateResponse& delta, bool first) {
  if (text_offsets_.size() <= static_cast<size_t>(choice)) text_offsets_.resize(choice + 1, 0);
  const std::vector<v1::TokenLogprob> logprobs(delta.logprobs().begin(), delta.logprobs().end());
  Json entry = {{"index", choice},
                {"logprobs", Logprobs(logprobs, &text_offsets_[choice])},
                {"finish_reason", FinishReason(delta.finish_reason())}};
  Json chunk;
  if (endpoint_ == Endpoint::kChatCompletions) {
    const bool finished = delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
    bool had_calls = false;
    Json message = ChatDelta(choice, delta.text(), finished, &had_calls);
    if (finished && had_calls && delta.finish_reason() != v1::FINISH_REASON_LENGTH) {
      entry["finish_reason"] = "tool_calls";
    }
    if (first) message["role"] = "assistant";
    entry["delta"] = std::move(message);
    chunk = Envelope("chat.completion.chunk");
  } else {
    entry["text"] = first ? echo_ + delta.text() : delta.text();
    chunk = Envelope("text_completion");
  }
  chunk["choices"] = Json::array({std::move(entry)});
  if (include_usage_) chunk["usage"] = nullptr;
  return chunk;
}

Json ResponseEncoder::ToolCallsJson(int choice, const std::vector<ParsedToolCall>& calls,
                                    int first) {
  Json list = Json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const int index = first + static_cast<int>(k);
    list.push_back({{"index", index},
                    {"id", absl::StrCat("call_", id_, "_", choice, "_", index)},
                    {"type", "function"},
                    {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments}}}});
  }
  return list;
}

void ResponseEncoder::KeepAllowedCalls(int emitted, std::vector<ParsedToolCall>* calls) const {
  if (tool_calls_.max_calls <= 0) return;
  const size_t allowed = static_cast<size_t>(std::max(0, tool_calls_.max_calls - emitted));
  if (calls->size() > allowed) calls->resize(allowed);
}

Json ResponseEncoder::ChatDelta(int choice, const std::string& text, bool finished,
                                bool* had_calls) {
  while (splitters_.size() <= static_cast<size_t>(choice)) {
    splitters_.emplace_back(reasoning_);
    tool_parsers_.emplace_back(tool_calls_);
    calls_emitted_.push_back(0);
  }
  ReasoningSplitter::Parts parts = splitters_[choice].Feed(text);
  if (finished) {
    ReasoningSplitter::Parts rest = splitters_[choice].Finish();
    parts.reasoning += rest.reasoning;
    parts.content += rest.content;
  }
  ToolCallParser::Output tools = tool_parsers_[choice].Feed(parts.content);
  if (finished) {
    ToolCallParser::Output rest = tool_parsers_[choice].Finish();
    tools.content += rest.content;
    tools.calls.insert(tools.calls.end(), rest.calls.begin(), rest.calls.end());
  }
  KeepAllowedCalls(calls_emitted_[choice], &tools.calls);
  Json message = Json::object();
  const bool anything = !parts.reasoning.empty() || !tools.calls.empty();
  if (!tools.content.empty() || !anything) message["content"] = tools.content;
  if (!parts.reasoning.empty()) message["reasoning_content"] = parts.reasoning;
  if (!tools.calls.empty()) {
    message["tool_calls"] = ToolCallsJson(choice, tools.calls, calls_emitted_[choice]);
    calls_emitted_[choice] += static_cast<int>(tools.calls.size());
  }
  *had_calls = calls_emitted_[choice] > 0;
  return message;
}

Json ResponseEncoder::UsageChunk(const Json& usage) const {
  Json chunk = Envelope(endpoint_ == Endpoint::kChatCompletions ? "chat.completion.chunk"
                                                                : "text_completion");
  chunk["choices"] = Json::array();
  chunk["usage"] = usage;
  return chunk;
}

Json ResponseEncoder::Usage(const std::vector<v1::Usage>& per_choice) {
  int64_t prompt = 0, completion = 0, cached = 0;
  if (!per_choice.empty()) {
    prompt = per_choice.front().prompt_tokens();
    cached = per_choice.front().cached_tokens();
  }
  for (const v1::Usage& usage : per_choice) completion += usage.completion_tokens();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

Json ResponseEncoder::Complete(const std::vector<ChoiceResult>& choices) const {
  Json body =
      Envelope(endpoint_ == Endpoint::kChatCompletions ? "chat.completion" : "text_completion");
  Json list = Json::array();
  std::vector<v1::Usage> usages;
  for (size_t i = 0; i < choices.size(); ++i) {
    int64_t offset = 0;
    Json entry = {{"index", i},
                  {"logprobs", Logprobs(choices[i].logprobs, &offset)},
                  {"finish_reason", FinishReason(choices[i].finish_reason)}};
    if (endpoint_ == Endpoint::kChatCompletions) {
      const ReasoningSplitter::Parts parts = ReasoningSplitter::Split(reasoning_, choices[i].text);
      ToolCallParser::Output tools = ToolCallParser::ParseAll(tool_calls_, parts.content);
      KeepAllowedCalls(0, &tools.calls);
      Json message = {{"role", "assistant"}, {"content", tools.content}};
      if (!parts.reasoning.empty()) message["reasoning_content"] = parts.reasoning;
      if (!tools.calls.empty()) {
        if (tools.content.empty()) message["content"] = nullptr;
        Json list = Json::array();
        for (size_t k = 0; k < tools.calls.size(); ++k) {
          list.push_back({{"id", absl::StrCat("call_", id_, "_", i, "_", k)},
                          {"type", "function"},
                          {"function", {{"name", tools.calls[k].name},
                                        {"arguments", tools.calls[k].arguments}}}});
        }
        message["tool_calls"] = std::move(list);
        if (choices[i].finish_reason != v1::FINISH_REASON_LENGTH) entry["finish_reason"] = "tool_calls";
      }
      entry["message"] = std::move(message);
    } else {
      entry["text"] = echo_ + choices[i].text;
    }
    list.push_back(std::move(entry));
    usages.push_back(choices[i].usage);
  }
  body["choices"] = std::move(list);
  body["usage"] = Usage(usages);
  return body;
}

}  // namespace tessera::router::openai
