// Which request fields this server honours. A field it cannot honour is refused with a 400 that
// names it, never silently ignored (a client that sends `min_tokens` or `functions` learns at
// once that it did not get what it asked for). Null values count as absent, so clients that send
// every optional field as null are served.
//
// Checked here: the body's top-level keys (per endpoint), `stream_options`' keys and each chat
// message's keys. A message's output-only keys that clients echo back from an earlier response
// (`refusal`, `annotations`) are accepted and carry nothing into the prompt.
//
// Threading: pure functions; HTTP handler threads.
#pragma once

#include "absl/status/status.h"
#include "router/openai/openai_json.h"
#include "router/openai/openai_request.h"

namespace tessera::router::openai {

// OK when every present field is one the endpoint honours; else INVALID_ARGUMENT starting with
// the first such field's name ("min_tokens is not supported by this server ...").
absl::Status RefuseFieldsNotHonoured(const Json& body, Endpoint endpoint);

}  // namespace tessera::router::openai
