// Parsing and validation of OpenAI-style request bodies (POST /v1/completions,
// /v1/chat/completions, /tokenize, /detokenize) into the public API's GenerateRequest, so that
// the router's own admission checks (request_builder.h) run on them exactly as on gRPC.
//
// A field of the wrong type, a value out of range or an unsupported option is INVALID_ARGUMENT
// whose message starts with the field's name (the error object's `param`). A field the server
// does not honour is refused the same way, never ignored (request_fields.h). A body nesting deeper than util::kMaxClientJsonDepth
// (64) levels, in any field, is INVALID_ARGUMENT "<field> nests deeper than 64 levels"
// (common/util/client_json.h).
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router::openai {

enum class Endpoint { kCompletions, kChatCompletions };

// OpenAI's legacy completions default; chat requests without a limit take the router's default.
inline constexpr uint32_t kCompletionsDefaultMaxTokens = 16;
inline constexpr int kMaxChoices = 16;

// tool_choice "required" or a named function (forced_tool_choice.h).
struct ForcedToolChoice {
  std::string function;     // named: the function every call is to; "" for "required"
  std::string json_schema;  // what the whole output must be
};

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                        // "" when absent
  ::tessera::v1::GenerateRequest generate;  // prompt, sampling, limits, stops, logprobs
  int n = 1;                                // choices, each its own engine request
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // return logprobs (completions: `logprobs` >= 0)
  bool echo = false;           // completions: the prompt's text starts each choice's text
  // The field that set generate.structured ("response_format", "guided_json", ...), so an
  // invalid constraint's 400 names it; "" when none.
  std::string structured_field;
  // tool_choice "required" or a named function (chat): the output is constrained to a call.
  std::optional<ForcedToolChoice> forced_tool;
  bool parallel_tool_calls = true;  // chat: false keeps only the first tool call
};

absl::StatusOr<OpenAiRequest> ParseGenerationRequest(Endpoint endpoint, std::string_view body);

// POST /tokenize: {"prompt": str, "add_special_tokens": bool} or {"messages": [...]} — as
// a TokenizeRequest.
absl::StatusOr<::tessera::v1::TokenizeRequest> ParseTokenizeRequest(std::string_view body);
// POST /detokenize: {"tokens": [int, ...]}.
absl::StatusOr<std::vector<int32_t>> ParseDetokenizeRequest(std::string_view body);

}  // namespace tessera::router::openai
