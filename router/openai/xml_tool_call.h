// The XML tool-call body Qwen3-Coder and the Qwen3.5/3.6 models write inside
// `<tool_call>…</tool_call>` (their templates teach it; vLLM's qwen3_coder parser reads it):
//   <function=NAME>
//   <parameter=P>
//   VALUE (any text, several lines)
//   </parameter>
//   …
//   </function>
// Each VALUE is text; it becomes a JSON value by the type the request's tool schema gives the
// parameter (string-like types stay strings; integer/number/boolean/object/array are parsed,
// and stay strings where they do not parse; "null" is null; a parameter the schema does not
// name stays a string), so `arguments` is the JSON object OpenAI clients expect.
// Pure functions; model output is untrusted (JSON parsed under util::kMaxClientJsonDepth).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::router::openai {

struct ParsedToolCall;

// function name → parameter name → its JSON-schema type ("string", "integer", ...).
using ToolParameterTypes = std::map<std::string, std::map<std::string, std::string>, std::less<>>;

// The parameter types of an OpenAI `tools` list (JSON text); empty where it is not one.
ToolParameterTypes ParameterTypesOf(std::string_view tools_json);

// The calls in one `<tool_call>` body (one or more <function=…> blocks); false, leaving `calls`
// as it was, when the body is not that XML.
bool ParseXmlToolCalls(std::string_view body, const ToolParameterTypes& types,
                       std::vector<ParsedToolCall>* calls);

}  // namespace tessera::router::openai
