#include "router/chat_inputs.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/client_json.h"
#include "common/util/status_macros.h"

namespace tessera::router {
namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<Json> ParseField(const std::string& text, const std::string& field,
                                bool (Json::*is_kind)() const, const char* kind) {
  absl::StatusOr<Json> json = util::ParseClientOrderedJson(text, field);
  if (!json.ok()) return json.status();
  if (!((*json).*is_kind)()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be ", kind));
  }
  return json;
}

// Each call's function.arguments: the object its JSON string encodes, where it is JSON.
absl::StatusOr<Json> ToolCalls(const std::string& text, const std::string& field) {
  TESSERA_ASSIGN_OR_RETURN(Json calls, ParseField(text, field, &Json::is_array, "a list"));
  for (Json& call : calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " entries must be {\"type\": \"function\", \"function\": {...}}"));
    }
    Json& arguments = call["function"]["arguments"];
    if (!arguments.is_string()) continue;
    absl::StatusOr<Json> parsed =
        util::ParseClientOrderedJson(arguments.get<std::string>(), field);
    if (parsed.ok()) arguments = *std::move(parsed);
  }
  return calls;
}

}  // namespace

absl::StatusOr<ChatInputs> ChatInputsFromProto(const v1::Chat& chat) {
  ChatInputs out;
  out.add_generation_prompt = chat.has_add_generation_prompt() ? chat.add_generation_prompt() : true;
  for (int i = 0; i < chat.messages_size(); ++i) {
    const v1::ChatMessage& m = chat.messages(i);
    chat::ChatMessage message{.role = m.role(), .content = m.content(), .tool_calls = nullptr,
                              .tool_call_id = m.tool_call_id(), .name = m.name(),
                              .reasoning_content = m.reasoning_content()};
    if (!m.tool_calls_json().empty()) {
      TESSERA_ASSIGN_OR_RETURN(
          message.tool_calls,
          ToolCalls(m.tool_calls_json(), absl::StrCat("chat.messages[", i, "].tool_calls_json")));
    }
    out.messages.push_back(std::move(message));
  }
  if (!chat.tools_json().empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.tools,
                             ParseField(chat.tools_json(), "chat.tools_json", &Json::is_array, "a list"));
  }
  if (!chat.template_kwargs_json().empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.template_kwargs,
                             ParseField(chat.template_kwargs_json(), "chat.template_kwargs_json",
                                        &Json::is_object, "an object"));
  }
  return out;
}

}  // namespace tessera::router
