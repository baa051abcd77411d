// tool_choice "required" or a named function ({"type": "function", "function": {"name": ...}})
// on /v1/chat/completions: the model must call a tool, so its output is constrained by a JSON
// schema (structured outputs) and the whole output becomes the call — as vLLM does, in one
// model-independent shape rather than each template's own tool-call markup:
//   named      the output is the function's arguments (its `parameters` schema; any object
//              when it declares none);
//   required   the output is a non-empty list of {"name": <one of the tools>, "parameters":
//              <that tool's schema>} (at most one entry with "parallel_tool_calls": false).
// The tools are still rendered into the prompt, so the model sees them as it would under "auto".
//
// Threading: pure functions; HTTP handler threads.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "router/openai/openai_json.h"
#include "router/openai/openai_request.h"

namespace tessera::router::openai {

// nullopt when tool_choice is absent, "auto" or "none". INVALID_ARGUMENT naming the field for a
// malformed tool_choice, a forced choice without tools, or a function `tools` does not list.
absl::StatusOr<std::optional<ForcedToolChoice>> ParseForcedToolChoice(const Json& body);

}  // namespace tessera::router::openai
