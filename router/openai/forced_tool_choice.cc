#include "router/openai/forced_tool_choice.h"

#include <utility>

namespace tessera::router::openai {
namespace {

// A tool's parameters schema (the tools were checked by ParseChat: each is a function with a
// name); an object of anything when it declares none.
Json ParametersOf(const Json& tool) {
  const Json& function = tool["function"];
  const Json* parameters = Field(function, "parameters");
  if (parameters != nullptr && parameters->is_object()) return *parameters;
  return Json{{"type", "object"}};
}

const Json* FindTool(const Json& tools, const std::string& name) {
  for (const Json& tool : tools) {
    if (tool["function"]["name"] == name) return &tool;
  }
  return nullptr;
}

Json RequiredSchema(const Json& tools, bool parallel) {
  Json any_of = Json::array();
  for (const Json& tool : tools) {
    any_of.push_back({{"type", "object"},
                      {"properties",
                       {{"name", {{"type", "string"}, {"enum", {tool["function"]["name"]}}}},
                        {"parameters", ParametersOf(tool)}}},
                      {"required", {"name", "parameters"}}});
  }
  Json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", std::move(any_of)}}}};
  if (!parallel) schema["maxItems"] = 1;
  return schema;
}

}  // namespace

absl::StatusOr<std::optional<ForcedToolChoice>> ParseForcedToolChoice(const Json& body) {
  const Json* choice = Field(body, "tool_choice");
  if (choice == nullptr || *choice == "auto" || *choice == "none") return std::nullopt;
  const Json* tools = Field(body, "tools");
  const bool has_tools = tools != nullptr && tools->is_array() && !tools->empty();
  if (*choice == "required") {
    if (!has_tools) return Invalid("tool_choice", "\"required\" needs a non-empty \"tools\"");
    bool parallel = true;
    if (const Json* p = Field(body, "parallel_tool_calls")) {
      if (!p->is_boolean()) return Invalid("parallel_tool_calls", "must be true or false");
      parallel = p->get<bool>();
    }
    return ForcedToolChoice{.function = "", .json_schema = RequiredSchema(*tools, parallel).dump()};
  }
  const Json* function = choice->is_object() ? Field(*choice, "function") : nullptr;
  const Json* name = function != nullptr && function->is_object() ? Field(*function, "name")
                                                                   : nullptr;
  if (!choice->is_object() || Field(*choice, "type") == nullptr ||
      (*choice)["type"] != "function" || name == nullptr || !name->is_string()) {
    return Invalid("tool_choice",
                   "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                   "\"function\": {\"name\": ...}}");
  }
  const std::string wanted = name->get<std::string>();
  const Json* tool = has_tools ? FindTool(*tools, wanted) : nullptr;
  if (tool == nullptr) {
    return Invalid("tool_choice", absl::StrCat("names the function \"", wanted,
                                               "\", which \"tools\" does not list"));
  }
  return ForcedToolChoice{.function = wanted, .json_schema = ParametersOf(*tool).dump()};
}

}  // namespace tessera::router::openai
