#include "router/openai/request_fields.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::router::openai {
namespace {

// Both endpoints: sampling, limits, stops, logprobs, streaming, structured outputs, and the
// vLLM extras we implement. `user` is OpenAI's end-user id for abuse tracking: it asks nothing of
// generation, so accepting it honours it.
constexpr std::string_view kCommonFields[] = {
    "model", "n", "temperature", "top_p", "min_p", "top_k", "seed", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "max_tokens", "max_completion_tokens", "logprobs", "logit_bias", "stream",
    "stream_options", "stop", "ignore_eos", "skip_special_tokens", "response_format",
    "guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs",
    "best_of", "user", "echo",  // echo: refused on chat when true, by the parser
};
constexpr std::string_view kCompletionsFields[] = {"prompt"};
constexpr std::string_view kChatFields[] = {
    "messages", "top_logprobs", "tools", "tool_choice",
    "parallel_tool_calls", "chat_template_kwargs", "add_generation_prompt",
};
constexpr std::string_view kStreamOptionsFields[] = {"include_usage"};
constexpr std::string_view kMessageFields[] = {
    "role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content",
    "refusal", "annotations",  // output-only: echoed back from a response, carry nothing
};

template <size_t N>
bool Listed(const std::string_view (&names)[N], std::string_view key) {
  for (std::string_view name : names) {
    if (name == key) return true;
  }
  return false;
}

// Why a known-but-unhonoured field is refused, where there is more to say than "not supported".
std::string_view Reason(std::string_view field) {
  if (field == "suffix") return " (insertion is not implemented)";
  if (field == "best_of") return " (use n)";
  if (field == "functions" || field == "function_call") return " (use tools and tool_choice)";
  if (field == "store" || field == "metadata") return " (responses are not stored)";
  return "";
}

absl::Status Refuse(std::string_view where, const std::vector<std::string>& fields) {
  const std::string first = absl::StrCat(util::ToAbsl(where), fields.front());
  std::string problem = absl::StrCat("is not supported by this server",
                                     util::ToAbsl(Reason(fields.front())));
  if (fields.size() > 1) {
    absl::StrAppend(&problem, "; nor are ",
                    absl::StrJoin(fields.begin() + 1, fields.end(), ", "));
  }
  absl::StrAppend(&problem, fields.size() > 1 ? ". Remove them" : ". Remove it",
                  ": fields this server cannot honour are refused, not ignored");
  return Invalid(first, problem);
}

// The present (non-null) keys of `object` that pass no listed check, in the body's order.
template <typename Honoured>
std::vector<std::string> Unhonoured(const Json& object, Honoured honoured) {
  std::vector<std::string> out;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!it->is_null() && !honoured(it.key(), *it)) out.push_back(it.key());
  }
  return out;
}

bool TopLevelHonoured(Endpoint endpoint, const std::string& key, const Json& value) {
  if (key == "best_of") return value == 1;  // one candidate per choice is what we do
  if (key == "store") return value == false;
  if (Listed(kCommonFields, key)) return true;
  return endpoint == Endpoint::kCompletions ? Listed(kCompletionsFields, key)
                                            : Listed(kChatFields, key);
}

absl::Status CheckMessages(const Json& body) {
  const Json* messages = Field(body, "messages");
  if (messages == nullptr || !messages->is_array()) return absl::OkStatus();  // ParseChat says
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    if (!message.is_object()) continue;
    std::vector<std::string> unknown = Unhonoured(
        message, [](const std::string& key, const Json&) { return Listed(kMessageFields, key); });
    if (!unknown.empty()) return Refuse(absl::StrCat("messages[", i, "]."), unknown);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RefuseFieldsNotHonoured(const Json& body, Endpoint endpoint) {
  std::vector<std::string> unknown =
      Unhonoured(body, [endpoint](const std::string& key, const Json& value) {
        return TopLevelHonoured(endpoint, key, value);
      });
  if (!unknown.empty()) return Refuse("", unknown);
  if (const Json* options = Field(body, "stream_options"); options && options->is_object()) {
    unknown = Unhonoured(*options, [](const std::string& key, const Json&) {
      return Listed(kStreamOptionsFields, key);
    });
    if (!unknown.empty()) return Refuse("stream_options.", unknown);
  }
  if (endpoint == Endpoint::kChatCompletions) return CheckMessages(body);
  return absl::OkStatus();
}

}  // namespace tessera::router::openai
