#include "router/openai/xml_tool_call.h"

#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "common/util/client_json.h"
#include "nlohmann/json.hpp"
#include "router/openai/tool_call_parser.h"

namespace tessera::router::openai {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";

std::string_view Trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// The schema's type of a property: a string, or the first non-"null" entry of a list.
std::string TypeOf(const Json& property) {
  if (!property.is_object() || !property.contains("type")) return "";
  const Json& type = property["type"];
  if (type.is_string()) return type.get<std::string>();
  if (type.is_array()) {
    for (const Json& t : type) {
      if (t.is_string() && t.get<std::string>() != "null") return t.get<std::string>();
    }
  }
  return "";
}

// The text between the tag's name and its `>` (the name), or nullopt without a `>`.
std::optional<std::string_view> TagName(std::string_view rest) {
  const size_t end = rest.find('>');
  if (end == std::string_view::npos) return std::nullopt;
  return Trim(rest.substr(0, end));
}

// One leading and one trailing newline are the format's, not the value's.
std::string_view ValueText(std::string_view raw) {
  if (raw.starts_with("\r\n")) raw.remove_prefix(2);
  else if (raw.starts_with('\n')) raw.remove_prefix(1);
  if (raw.ends_with("\r\n")) raw.remove_suffix(2);
  else if (raw.ends_with('\n')) raw.remove_suffix(1);
  return raw;
}

Json TypedValue(std::string_view text, std::string_view type) {
  std::string lower(Trim(text));
  absl::AsciiStrToLower(&lower);
  if (type.empty() || type == "string" || type == "str" || type == "text" || type == "enum") {
    return std::string(text);
  }
  if (lower == "null") return nullptr;
  if (type == "boolean" || type == "bool") {
    if (lower == "true" || lower == "false") return lower == "true";
    return std::string(text);
  }
  absl::StatusOr<Json> parsed =
      util::ParseClientOrderedJson(Trim(text), "tool call parameter");
  if (!parsed.ok()) return std::string(text);
  const bool integer = type == "integer" || type == "int";
  const bool number = type == "number" || type == "float";
  const bool structured = type == "object" || type == "array";
  if ((integer && parsed->is_number_integer()) || (number && parsed->is_number()) ||
      (structured && (parsed->is_object() || parsed->is_array()))) {
    return *std::move(parsed);
  }
  return std::string(text);
}

// The parameters of one function block's body into `arguments`; false on a malformed one.
bool ParseParameters(std::string_view body, const std::map<std::string, std::string>* types,
                     Json* arguments) {
  while (true) {
    const size_t open = body.find(kParameterOpen);
    if (open == std::string_view::npos) return Trim(body).empty();
    if (!Trim(body.substr(0, open)).empty()) return false;
    body.remove_prefix(open + kParameterOpen.size());
    const std::optional<std::string_view> name = TagName(body);
    if (!name.has_value() || name->empty()) return false;
    body.remove_prefix(body.find('>') + 1);
    // A value ends at its closing tag; a model that forgets it ends it at the next parameter.
    size_t end = body.find(kParameterClose);
    const size_t next = body.find(kParameterOpen);
    const bool closed = end != std::string_view::npos && (next == std::string_view::npos || end < next);
    if (!closed) end = next == std::string_view::npos ? body.size() : next;
    std::string type;
    if (types != nullptr) {
      if (auto it = types->find(std::string(*name)); it != types->end()) type = it->second;
    }
    (*arguments)[std::string(*name)] = TypedValue(ValueText(body.substr(0, end)), type);
    body.remove_prefix(closed ? end + kParameterClose.size() : end);
  }
}

}  // namespace

ToolParameterTypes ParameterTypesOf(std::string_view tools_json) {
  ToolParameterTypes out;
  if (tools_json.empty()) return out;
  absl::StatusOr<Json> tools = util::ParseClientOrderedJson(tools_json, "tools");
  if (!tools.ok() || !tools->is_array()) return out;
  for (const Json& tool : *tools) {
    const Json* function = tool.is_object() && tool.contains("function") ? &tool["function"] : &tool;
    if (!function->is_object() || !function->contains("name") || !(*function)["name"].is_string()) {
      continue;
    }
    auto& types = out[(*function)["name"].get<std::string>()];
    const Json* parameters = function->contains("parameters") ? &(*function)["parameters"] : nullptr;
    if (parameters == nullptr || !parameters->is_object() || !parameters->contains("properties") ||
        !(*parameters)["properties"].is_object()) {
      continue;
    }
    for (const auto& property : (*parameters)["properties"].items()) {
      types[property.key()] = TypeOf(property.value());
    }
  }
  return out;
}

bool ParseXmlToolCalls(std::string_view body, const ToolParameterTypes& types,
                       std::vector<ParsedToolCall>* calls) {
  std::vector<ParsedToolCall> found;
  while (true) {
    const size_t open = body.find(kFunctionOpen);
    if (open == std::string_view::npos) break;
    if (!Trim(body.substr(0, open)).empty()) return false;
    body.remove_prefix(open + kFunctionOpen.size());
    const std::optional<std::string_view> name = TagName(body);
    if (!name.has_value() || name->empty()) return false;
    body.remove_prefix(body.find('>') + 1);
    const size_t close = body.find(kFunctionClose);
    const std::string_view function_body = body.substr(0, close);  // unclosed: to the end
    const auto it = types.find(*name);
    Json arguments = Json::object();
    if (!ParseParameters(function_body, it != types.end() ? &it->second : nullptr, &arguments)) {
      return false;
    }
    found.push_back({.name = std::string(*name), .arguments = arguments.dump()});
    body.remove_prefix(close == std::string_view::npos ? body.size()
                                                       : close + kFunctionClose.size());
  }
  if (found.empty() || !Trim(body).empty()) return false;
  calls->insert(calls->end(), found.begin(), found.end());
  return true;
}

}  // namespace tessera::router::openai
