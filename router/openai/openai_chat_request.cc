#include "router/openai/openai_chat_request.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "router/openai/openai_json.h"
#include "common/util/status_macros.h"

namespace tessera::router::openai {
namespace {


// A message's content: a string or a list of {"type": "text", "text": ...} parts.
absl::StatusOr<std::string> MessageContent(const Json& content, const std::string& name) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Invalid(name, "must be a string or a list of text parts");
  std::string text;
  for (const Json& part : content) {
    const Json* type = part.is_object() ? Field(part, "type") : nullptr;
    const Json* part_text = part.is_object() ? Field(part, "text") : nullptr;
    if (type == nullptr || *type != "text" || part_text == nullptr || !part_text->is_string()) {
      return Invalid(name,
                     "parts must be {\"type\": \"text\", \"text\": \"...\"} (only text is "
                     "supported)");
    }
    text += part_text->get<std::string>();
  }
  return text;
}

// tool_calls: [{id, type: "function", function: {name: str, arguments: str}}].
absl::Status CheckToolCalls(const Json& calls, const std::string& name) {
  if (!calls.is_array()) return Invalid(name, "must be a list");
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string call = absl::StrCat(name, "[", i, "]");
    const Json* function = calls[i].is_object() ? Field(calls[i], "function") : nullptr;
    if (function == nullptr || !function->is_object()) return Invalid(call + ".function", "is required");
    const Json* fname = Field(*function, "name");
    if (fname == nullptr || !fname->is_string()) return Invalid(call + ".function.name", "must be a string");
  }
  return absl::OkStatus();
}

absl::Status ParseMessage(const Json& message, const std::string& name, v1::ChatMessage* out) {
  const Json* role = message.is_object() ? Field(message, "role") : nullptr;
  if (role == nullptr || !role->is_string()) return Invalid(name + ".role", "must be a string");
  out->set_role(role->get<std::string>());
  if (const Json* content = Field(message, "content")) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, MessageContent(*content, name + ".content"));
    out->set_content(std::move(text));
  }  // null or absent: "" (what vLLM gives a template for an assistant turn of tool calls)
  if (const Json* calls = Field(message, "tool_calls")) {
    TESSERA_RETURN_IF_ERROR(CheckToolCalls(*calls, name + ".tool_calls"));
    if (!calls->empty()) out->set_tool_calls_json(calls->dump());
  }
  for (const char* key : {"tool_call_id", "name", "reasoning_content"}) {
    const Json* value = Field(message, key);
    if (value == nullptr) continue;
    if (!value->is_string()) return Invalid(absl::StrCat(name, ".", key), "must be a string");
    const std::string text = value->get<std::string>();
    const std::string_view k = key;
    if (k == "name") out->set_name(text);
    if (k == "tool_call_id") out->set_tool_call_id(text);
    if (k == "reasoning_content") out->set_reasoning_content(text);
  }
  return absl::OkStatus();
}

// tools: [{type: "function", function: {name: str, description?, parameters?}}].
absl::Status CheckTools(const Json& tools) {
  if (!tools.is_array()) return Invalid("tools", "must be a list");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string name = absl::StrCat("tools[", i, "]");
    const Json* type = tools[i].is_object() ? Field(tools[i], "type") : nullptr;
    if (type == nullptr || *type != "function") return Invalid(name + ".type", "must be \"function\"");
    const Json* function = Field(tools[i], "function");
    const Json* fname = function != nullptr && function->is_object() ? Field(*function, "name") : nullptr;
    if (fname == nullptr || !fname->is_string()) return Invalid(name + ".function.name", "must be a string");
  }
  return absl::OkStatus();
}

// Whether the tools go to the template: "none" no; "auto", "required" and a named function yes
// (forced_tool_choice.h constrains the output of the last two).
bool ToolChoiceOffersTools(const Json& body) {
  const Json* choice = Field(body, "tool_choice");
  return choice == nullptr || *choice != "none";
}

}  // namespace

absl::StatusOr<v1::Chat> ParseChat(const Json& body) {
  const Json* messages = Field(body, "messages");
  if (messages == nullptr) return Invalid("messages", "is required");
  if (!messages->is_array() || messages->empty()) {
    return Invalid("messages", "must be a non-empty list of {role, content}");
  }
  v1::Chat chat;
  for (size_t i = 0; i < messages->size(); ++i) {
    TESSERA_RETURN_IF_ERROR(
        ParseMessage((*messages)[i], absl::StrCat("messages[", i, "]"), chat.add_messages()));
  }
  const bool offer_tools = ToolChoiceOffersTools(body);
  if (const Json* tools = Field(body, "tools")) {
    TESSERA_RETURN_IF_ERROR(CheckTools(*tools));
    if (offer_tools && !tools->empty()) chat.set_tools_json(tools->dump());
  }
  if (const Json* kwargs = Field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) return Invalid("chat_template_kwargs", "must be an object");
    chat.set_template_kwargs_json(kwargs->dump());
  }
  if (const Json* add = Field(body, "add_generation_prompt")) {
    if (!add->is_boolean()) return Invalid("add_generation_prompt", "must be true or false");
    chat.set_add_generation_prompt(add->get<bool>());
  }
  return chat;
}

}  // namespace tessera::router::openai
