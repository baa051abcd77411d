// The chat part of an OpenAI request body (POST /v1/chat/completions, /tokenize with messages):
// `messages` (roles system/developer/user/assistant/tool; content a string, text parts or null;
// an assistant's `tool_calls` and `reasoning_content`; a tool result's `tool_call_id`; `name`), `tools`, `tool_choice`
// and vLLM's `chat_template_kwargs`, as the public API's Chat, which the model's chat template
// renders (router/chat_inputs.h). Errors are INVALID_ARGUMENT starting with the field's name.
//
// tool_choice: "auto" (the default) gives the template the tools, "none" does not; "required"
// and a named function are refused until the output is constrained to a call (issue 25).
//
// Threading: pure function.
#pragma once

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router::openai {

absl::StatusOr<::tessera::v1::Chat> ParseChat(const nlohmann::ordered_json& body);

}  // namespace tessera::router::openai
