#include "router/openai/openai_request.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "router/logit_bias_json.h"
#include "router/openai/openai_chat_request.h"
#include "router/openai/forced_tool_choice.h"
#include "router/openai/openai_structured_request.h"
#include "router/openai/request_fields.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "router/openai/openai_json.h"
#include "absl/strings/string_view.h"
#include "common/util/client_json.h"

namespace tessera::router::openai {
namespace {

namespace v1 = ::tessera::v1;

// Under the client-JSON nesting cap: nothing below walks deeper than it (and copying or dumping
// a value, which nlohmann does recursively, stays shallow too).
absl::StatusOr<Json> ParseObject(std::string_view body) {
  absl::StatusOr<Json> json = util::ParseClientOrderedJson(body);
  if (!json.ok()) return json.status();
  if (!json->is_object()) return absl::InvalidArgumentError("body must be a JSON object");
  return json;
}

absl::StatusOr<double> Number(const Json& value, const char* name) {
  if (!value.is_number()) return Invalid(name, "must be a number");
  return value.get<double>();
}

absl::StatusOr<int64_t> Integer(const Json& value, const char* name, int64_t min, int64_t max) {
  if (!value.is_number_integer()) return Invalid(name, "must be an integer");
  const int64_t v = value.get<int64_t>();
  if (v < min || v > max) {
    return Invalid(name, absl::StrCat("must be in [", min, ", ", max, "], got ", v));
  }
  return v;
}

absl::StatusOr<bool> Bool(const Json& value, const char* name) {
  if (!value.is_boolean()) return Invalid(name, "must be true or false");
  return value.get<bool>();
}

absl::StatusOr<std::vector<int32_t>> TokenList(const Json& value, const char* name) {
  std::vector<int32_t> ids;
  if (!value.is_array()) return Invalid(name, "must be an array of token ids");
  for (const Json& id : value) {
    if (!id.is_number_integer()) return Invalid(name, "must be an array of integer token ids");
    const int64_t v = id.get<int64_t>();
    if (v < 0 || v > std::numeric_limits<int32_t>::max()) {
      return Invalid(name, absl::StrCat("has a token id out of range: ", v));
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// prompt: a string, [string], [int, ...] or [[int, ...]] — one prompt per request. The one
// optional level of wrapping is unwrapped here, not by recursion: the schema has no deeper form.
absl::Status SetPrompt(const Json& prompt, v1::GenerateRequest& out) {
  constexpr const char* kShape = "must be a string, a list of token ids, or a list of one of them";
  const Json* value = &prompt;
  if (value->is_array() && !value->empty() && !(*value)[0].is_number_integer()) {
    if (value->size() != 1) {
      return Invalid(
          "prompt", absl::StrCat("holds ", value->size(), " prompts; send one request per prompt"));
    }
    value = &(*value)[0];
    if (value->is_array() && !value->empty() && !(*value)[0].is_number_integer()) {
      return Invalid("prompt", kShape);  // [[...]] holding anything but token ids
    }
  }
  if (value->is_string()) {
    out.set_text(value->get<std::string>());
    return absl::OkStatus();
  }
  if (!value->is_array() || value->empty()) return Invalid("prompt", kShape);
  absl::StatusOr<std::vector<int32_t>> ids = TokenList(*value, "prompt");
  if (!ids.ok()) return ids.status();
  out.mutable_token_ids()->mutable_ids()->Add(ids->begin(), ids->end());
  return absl::OkStatus();
}

absl::Status SetStop(const Json& stop, v1::GenerateRequest& out) {
  if (stop.is_string()) {
    out.add_stop(stop.get<std::string>());
    return absl::OkStatus();
  }
  if (!stop.is_array()) return Invalid("stop", "must be a string or a list of strings");
  for (const Json& s : stop) {
    if (!s.is_string()) return Invalid("stop", "must be a string or a list of strings");
    out.add_stop(s.get<std::string>());
  }
  return absl::OkStatus();
}

// Sampling fields shared by both endpoints (OpenAI's and vLLM's extras).
absl::Status SetSampling(const Json& body, v1::SamplingParams& out) {
  struct FloatField {
    const char* name;
    void (v1::SamplingParams::*set)(float);
  };
  for (const FloatField& f :
       {FloatField{"temperature", &v1::SamplingParams::set_temperature},
        FloatField{"top_p", &v1::SamplingParams::set_top_p},
        FloatField{"min_p", &v1::SamplingParams::set_min_p},
        FloatField{"presence_penalty", &v1::SamplingParams::set_presence_penalty},
        FloatField{"frequency_penalty", &v1::SamplingParams::set_frequency_penalty},
        FloatField{"repetition_penalty", &v1::SamplingParams::set_repetition_penalty}}) {
    if (const Json* value = Field(body, f.name)) {
      absl::StatusOr<double> v = Number(*value, f.name);
      if (!v.ok()) return v.status();
      (out.*f.set)(static_cast<float>(*v));
    }
  }
  if (const Json* top_k = Field(body, "top_k")) {
    // vLLM: -1 (or 0) turns top-k off.
    absl::StatusOr<int64_t> v = Integer(*top_k, "top_k", -1, std::numeric_limits<int32_t>::max());
    if (!v.ok()) return v.status();
    out.set_top_k(*v < 0 ? 0 : static_cast<int32_t>(*v));
  }
  if (const Json* seed = Field(body, "seed")) {
    if (!seed->is_number_integer()) return Invalid("seed", "must be an integer");
    out.set_seed(seed->is_number_unsigned() ? seed->get<uint64_t>()
                                            : static_cast<uint64_t>(seed->get<int64_t>()));
  }
  return absl::OkStatus();
}

absl::Status SetMaxTokens(const Json& body, Endpoint endpoint, v1::GenerateRequest& out) {
  const char* name = "max_tokens";
  const Json* value = Field(body, "max_tokens");
  if (const Json* v = Field(body, "max_completion_tokens")) {
    value = v;
    name = "max_completion_tokens";
  }
  if (value == nullptr) {
    if (endpoint == Endpoint::kCompletions) out.set_max_tokens(kCompletionsDefaultMaxTokens);
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> v = Integer(*value, name, 1, std::numeric_limits<int32_t>::max());
  if (!v.ok()) return v.status();
  out.set_max_tokens(static_cast<uint32_t>(*v));
  return absl::OkStatus();
}

// completions: logprobs = N (top N alternatives); chat: logprobs = bool, top_logprobs = N.
absl::Status SetLogprobs(const Json& body, Endpoint endpoint, OpenAiRequest& out) {
  const Json* logprobs = Field(body, "logprobs");
  const Json* top = Field(body, "top_logprobs");
  if (endpoint == Endpoint::kCompletions) {
    if (logprobs == nullptr) return absl::OkStatus();
    absl::StatusOr<int64_t> n = Integer(*logprobs, "logprobs", 0, 20);
    if (!n.ok()) return n.status();
    out.logprobs = true;
    out.generate.set_logprobs(true);
    out.generate.set_top_logprobs(static_cast<uint32_t>(*n));
    return absl::OkStatus();
  }
  if (logprobs != nullptr) {
    absl::StatusOr<bool> on = Bool(*logprobs, "logprobs");
    if (!on.ok()) return on.status();
    out.logprobs = *on;
  }
  if (top != nullptr) {
    absl::StatusOr<int64_t> n = Integer(*top, "top_logprobs", 0, 20);
    if (!n.ok()) return n.status();
    if (!out.logprobs && *n > 0) return Invalid("top_logprobs", "needs \"logprobs\": true");
    out.generate.set_top_logprobs(static_cast<uint32_t>(*n));
  }
  out.generate.set_logprobs(out.logprobs);
  return absl::OkStatus();
}

// logit_bias: {"<token id>": bias, ...} (OpenAI's shape: ids as JSON object keys); the ids and
// bias range are checked in BuildRequest against the vocabulary.
absl::Status SetLogitBias(const Json& body, v1::GenerateRequest& out) {
  const Json* bias = Field(body, "logit_bias");
  if (bias == nullptr) return absl::OkStatus();
  return SetLogitBiasFromJson(*bias, "logit_bias", &out);
}

absl::Status SetStreaming(const Json& body, OpenAiRequest& out) {
  if (const Json* stream = Field(body, "stream")) {
    absl::StatusOr<bool> on = Bool(*stream, "stream");
    if (!on.ok()) return on.status();
    out.stream = *on;
  }
  if (const Json* options = Field(body, "stream_options")) {
    if (!out.stream) return Invalid("stream_options", "is only allowed with \"stream\": true");
    if (!options->is_object()) return Invalid("stream_options", "must be an object");
    if (const Json* usage = Field(*options, "include_usage")) {
      absl::StatusOr<bool> on = Bool(*usage, "stream_options.include_usage");
      if (!on.ok()) return on.status();
      out.include_usage = *on;
    }
  }
  return absl::OkStatus();
}

absl::Status SetPromptOrMessages(const Json& body, Endpoint endpoint, v1::GenerateRequest& out) {
  if (endpoint == Endpoint::kCompletions) {
    const Json* prompt = Field(body, "prompt");
    if (prompt == nullptr) return Invalid("prompt", "is required");
    return SetPrompt(*prompt, out);
  }
  absl::StatusOr<v1::Chat> chat = ParseChat(body);
  if (!chat.ok()) return chat.status();
  *out.mutable_chat() = std::move(*chat);
  return absl::OkStatus();
}

// tool_choice "required" / a named function: the call's JSON schema becomes the request's
// structured constraint (so it cannot also have one of its own).
absl::Status SetForcedToolChoice(const Json& body, OpenAiRequest& out) {
  absl::StatusOr<std::optional<ForcedToolChoice>> forced = ParseForcedToolChoice(body);
  if (!forced.ok()) return forced.status();
  if (!forced->has_value()) return absl::OkStatus();
  if (!out.structured_field.empty()) {
    return Invalid("tool_choice", absl::StrCat("forces a tool call; it cannot be combined with ",
                                               out.structured_field));
  }
  out.generate.mutable_structured()->set_json_schema((*forced)->json_schema);
  out.structured_field = "tool_choice";
  out.forced_tool = std::move(**forced);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseGenerationRequest(Endpoint endpoint, std::string_view body) {
  absl::StatusOr<Json> json = ParseObject(body);
  if (!json.ok()) return json.status();
  OpenAiRequest out;
  out.endpoint = endpoint;
  if (const Json* model = Field(*json, "model")) {
    if (!model->is_string()) return Invalid("model", "must be a string");
    out.model = model->get<std::string>();
  }
  if (const Json* n = Field(*json, "n")) {
    absl::StatusOr<int64_t> v = Integer(*n, "n", 1, kMaxChoices);
    if (!v.ok()) return v.status();
    out.n = static_cast<int>(*v);
  }
  for (absl::Status status :
       {RefuseFieldsNotHonoured(*json, endpoint), SetPromptOrMessages(*json, endpoint, out.generate),
        SetSampling(*json, *out.generate.mutable_sampling()),
        SetMaxTokens(*json, endpoint, out.generate), SetLogprobs(*json, endpoint, out),
        SetLogitBias(*json, out.generate),
        SetStreaming(*json, out),
        SetStructuredOutput(*json, out.generate, &out.structured_field)}) {
    if (!status.ok()) return status;
  }
  if (endpoint == Endpoint::kChatCompletions) {
    if (absl::Status s = SetForcedToolChoice(*json, out); !s.ok()) return s;
    if (const Json* parallel = Field(*json, "parallel_tool_calls")) {
      absl::StatusOr<bool> on = Bool(*parallel, "parallel_tool_calls");
      if (!on.ok()) return on.status();
      out.parallel_tool_calls = *on;
    }
  }
  if (const Json* stop = Field(*json, "stop")) {
    if (absl::Status s = SetStop(*stop, out.generate); !s.ok()) return s;
  }
  if (const Json* echo = Field(*json, "echo")) {
    absl::StatusOr<bool> on = Bool(*echo, "echo");
    if (!on.ok()) return on.status();
    if (*on && endpoint != Endpoint::kCompletions) {
      return Invalid("echo", "is for /v1/completions only");
    }
    // The prompt's own logprobs would need the worker to return them (prompt_logprobs).
    if (*on && out.logprobs) return Invalid("echo", "cannot be combined with logprobs here");
    out.echo = *on;
  }
  if (const Json* ignore_eos = Field(*json, "ignore_eos")) {
    absl::StatusOr<bool> on = Bool(*ignore_eos, "ignore_eos");
    if (!on.ok()) return on.status();
    out.generate.set_ignore_eos(*on);
  }
  if (const Json* skip = Field(*json, "skip_special_tokens")) {
    absl::StatusOr<bool> on = Bool(*skip, "skip_special_tokens");
    if (!on.ok()) return on.status();
    out.generate.set_skip_special_tokens(*on);
  } else {
    out.generate.set_skip_special_tokens(true);  // vLLM's default for its OpenAI server
  }
  return out;
}

absl::StatusOr<v1::TokenizeRequest> ParseTokenizeRequest(std::string_view body) {
  absl::StatusOr<Json> json = ParseObject(body);
  if (!json.ok()) return json.status();
  v1::TokenizeRequest out;
  if (Field(*json, "messages") != nullptr) {
    absl::StatusOr<v1::Chat> chat = ParseChat(*json);
    if (!chat.ok()) return chat.status();
    *out.mutable_chat() = std::move(*chat);
    return out;
  }
  const Json* prompt = Field(*json, "prompt");
  if (prompt == nullptr || !prompt->is_string()) {
    return Invalid("prompt", "must be a string (or give \"messages\")");
  }
  out.set_text(prompt->get<std::string>());
  out.set_add_special_tokens(true);
  if (const Json* add = Field(*json, "add_special_tokens")) {
    absl::StatusOr<bool> on = Bool(*add, "add_special_tokens");
    if (!on.ok()) return on.status();
    out.set_add_special_tokens(*on);
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> ParseDetokenizeRequest(std::string_view body) {
  absl::StatusOr<Json> json = ParseObject(body);
  if (!json.ok()) return json.status();
  const Json* tokens = Field(*json, "tokens");
  if (tokens == nullptr) return Invalid("tokens", "is required");
  return TokenList(*tokens, "tokens");
}

}  // namespace tessera::router::openai
