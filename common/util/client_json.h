// Parsing JSON that a client sent, under a nesting cap.
//
// nlohmann::json parses and destroys values iteratively, but copying, dump() and any recursive
// walk of ours recurse once per level: a 120 kB body of 60,000 nested arrays is enough to
// overflow a thread's stack and kill the process. Every door that parses a client's JSON goes
// through ParseClientJson, so no value deeper than the cap ever reaches code that recurses.
//
// Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera::util {

// No OpenAI-style request needs more than a handful of levels (a body, messages, a message, its
// content parts, a part); 64 leaves room for JSON-schema-like fields while keeping any recursion
// over the value a few kilobytes of stack.
inline constexpr int kMaxClientJsonDepth = 64;

// Parses `text` as one JSON value. The top-level value is level 1; a value with more than
// `max_depth` levels of nested arrays/objects is INVALID_ARGUMENT "<field> nests deeper than
// <max_depth> levels", naming the top-level object's key under which the nesting first went too
// deep (its first 64 bytes), or `document` when the top-level value is not an object, so that the
// HTTP error's `param` names the field. Text that is not JSON is INVALID_ARGUMENT "<document> is
// not valid JSON". The over-deep part is dropped while parsing, so memory stays linear in `text`.
absl::StatusOr<nlohmann::json> ParseClientJson(std::string_view text,
                                               std::string_view document = "body",
                                               int max_depth = kMaxClientJsonDepth);

// The same, keeping each object's keys in the client's order (what a chat template prints with
// `tojson`: tool schemas, tool-call arguments).
absl::StatusOr<nlohmann::ordered_json> ParseClientOrderedJson(
    std::string_view text, std::string_view document = "body",
    int max_depth = kMaxClientJsonDepth);

}  // namespace tessera::util
