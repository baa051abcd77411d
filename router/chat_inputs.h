// A public-API Chat (proto tessera.v1.Chat) as the chat template's inputs: the messages with their
// tool calls, tool-call ids and names, the request's tools and chat_template_kwargs. The JSON
// fields are the client's: parsed under util::kMaxClientJsonDepth, keys in the client's order
// (a template prints them with tojson), each tool call's `arguments` string given to the template
// as the object it encodes (as vLLM does), or left a string when it is not JSON.
//
// Called on the request's thread (gRPC or HTTP handler); pure function.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "common/chat/chat_template.h"
#include "nlohmann/json.hpp"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router {

struct ChatInputs {
  std::vector<chat::ChatMessage> messages;
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;            // null: none
  nlohmann::ordered_json template_kwargs;  // null: none

  chat::ChatExtras extras() const {
    return {.tools = tools.is_null() ? nullptr : &tools,
            .template_kwargs = template_kwargs.is_null() ? nullptr : &template_kwargs};
  }
};

// INVALID_ARGUMENT naming the field ("chat.tools_json is not valid JSON",
// "chat.messages[2].tool_calls_json must be a list") for JSON that is not what it must be.
absl::StatusOr<ChatInputs> ChatInputsFromProto(const v1::Chat& chat);

}  // namespace tessera::router
