#include "router/openai/openai_structured_request.h"

#include <string>
#include <vector>

namespace tessera::router::openai {
namespace {

namespace v1 = ::tessera::v1;

// response_format: "text" adds nothing; "json_object" any object; "json_schema" its schema.
absl::Status SetResponseFormat(const Json& format, v1::StructuredOutput& out, bool* set) {
  if (!format.is_object()) return Invalid("response_format", "must be an object");
  const Json* type = Field(format, "type");
  if (type == nullptr || !type->is_string()) {
    return Invalid("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  }
  const std::string kind = type->get<std::string>();
  if (kind == "text") return absl::OkStatus();
  if (kind == "json_object") {
    out.set_json_object(true);
    *set = true;
    return absl::OkStatus();
  }
  if (kind != "json_schema") {
    return Invalid("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  }
  const Json* spec = Field(format, "json_schema");
  if (spec == nullptr || !spec->is_object()) {
    return Invalid("response_format.json_schema", "must be an object with a \"schema\"");
  }
  const Json* schema = Field(*spec, "schema");
  if (schema == nullptr || !schema->is_object()) {
    return Invalid("response_format.json_schema.schema", "must be a JSON Schema object");
  }
  out.set_json_schema(schema->dump());
  *set = true;
  return absl::OkStatus();
}

absl::Status SetGuidedJson(const Json& value, v1::StructuredOutput& out) {
  if (value.is_string()) {
    out.set_json_schema(value.get<std::string>());
  } else if (value.is_object()) {
    out.set_json_schema(value.dump());
  } else {
    return Invalid("guided_json", "must be a JSON Schema (an object or its JSON text)");
  }
  return absl::OkStatus();
}

absl::Status SetGuidedChoice(const Json& value, v1::StructuredOutput& out) {
  if (!value.is_array()) return Invalid("guided_choice", "must be an array of strings");
  v1::Choices* choices = out.mutable_choice();
  for (const Json& choice : value) {
    if (!choice.is_string()) return Invalid("guided_choice", "must be an array of strings");
    choices->add_values(choice.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status SetString(const Json& value, const char* name, std::string* out) {
  if (!value.is_string()) return Invalid(name, "must be a string");
  *out = value.get<std::string>();
  return absl::OkStatus();
}

// vLLM's current form (since v0.12): {"structured_outputs": {"json" | "regex" | "choice" |
// "grammar" | "json_object": ...}}, one key.
absl::Status SetStructuredOutputs(const Json& value, v1::StructuredOutput& out) {
  if (!value.is_object() || value.size() != 1) {
    return Invalid("structured_outputs",
                   "must be an object with one of json, regex, choice, grammar, json_object");
  }
  const auto first = value.begin();
  const std::string& key = first.key();
  const Json& spec = first.value();
  if (key == "json") return SetGuidedJson(spec, out);
  if (key == "regex") return SetString(spec, "structured_outputs.regex", out.mutable_regex());
  if (key == "grammar") return SetString(spec, "structured_outputs.grammar", out.mutable_grammar());
  if (key == "choice") return SetGuidedChoice(spec, out);
  if (key == "json_object" && spec == true) {
    out.set_json_object(true);
    return absl::OkStatus();
  }
  return Invalid("structured_outputs",
                 "must be an object with one of json, regex, choice, grammar, json_object");
}

}  // namespace

absl::Status SetStructuredOutput(const Json& body, v1::GenerateRequest& out,
                                 std::string* field) {
  v1::StructuredOutput structured;
  std::vector<const char*> given;
  if (const Json* format = Field(body, "response_format")) {
    bool set = false;
    if (absl::Status s = SetResponseFormat(*format, structured, &set); !s.ok()) return s;
    if (set) given.push_back("response_format");
  }
  absl::Status status = absl::OkStatus();
  if (const Json* value = Field(body, "guided_json")) {
    status.Update(SetGuidedJson(*value, structured));
    given.push_back("guided_json");
  }
  if (const Json* value = Field(body, "guided_regex")) {
    status.Update(SetString(*value, "guided_regex", structured.mutable_regex()));
    given.push_back("guided_regex");
  }
  if (const Json* value = Field(body, "guided_grammar")) {
    status.Update(SetString(*value, "guided_grammar", structured.mutable_grammar()));
    given.push_back("guided_grammar");
  }
  if (const Json* value = Field(body, "guided_choice")) {
    status.Update(SetGuidedChoice(*value, structured));
    given.push_back("guided_choice");
  }
  if (const Json* value = Field(body, "structured_outputs")) {
    status.Update(SetStructuredOutputs(*value, structured));
    given.push_back("structured_outputs");
  }
  if (!status.ok()) return status;
  if (given.size() > 1) {
    return Invalid(given[1], absl::StrCat("cannot be combined with ", given[0],
                                          " (one structured-output constraint per request)"));
  }
  if (!given.empty()) {
    *out.mutable_structured() = std::move(structured);
    *field = given[0];
  }
  return absl::OkStatus();
}

}  // namespace tessera::router::openai
