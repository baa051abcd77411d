// Structured outputs on the OpenAI API: `response_format` ({"type": "text" | "json_object" |
// "json_schema", "json_schema": {"name", "schema", "strict"}}), vLLM's `structured_outputs`
// ({"json" | "regex" | "choice" | "grammar" | "json_object": ...}) and its older guided decoding
// fields (`guided_json` as a schema object or its JSON text, `guided_regex`, `guided_grammar`,
// `guided_choice`, removed from vLLM in v0.12 but still sent by clients), into the
// GenerateRequest's `structured` constraint. At most one constraint
// per request; the constraint itself is parsed when the request is built (request_builder.h),
// where an invalid schema, regex or grammar gets its 400.
//
// Threading: pure functions; HTTP handler threads.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "router/openai/openai_json.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router::openai {

// INVALID_ARGUMENT naming the field for a malformed one or for two constraints at once;
// `field` gets the name of the field that set the constraint ("" when none).
absl::Status SetStructuredOutput(const Json& body, ::tessera::v1::GenerateRequest& out,
                                 std::string* field);

}  // namespace tessera::router::openai
