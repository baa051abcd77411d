// `tessera bench --api openai`: one streamed POST /v1/completions (SSE, include_usage) as a
// RequestRecord, measured like the gRPC path (TTFT, per-token gaps, decode rate), so the two
// front doors can be compared on the same router.
//
// Every `data:` chunk with a choice is one engine response (one token unless the detokenizer
// held text back); the token count comes from the final usage chunk.
//
// Threading: call from any thread; each call uses its own connection.
#pragma once

#include <string>

#include "tools/bench/client_auth.h"
#include "tools/bench/load_generator.h"

namespace tessera::bench {

// `http_addr` is HOST:PORT of the router's HTTP API; `model` is sent as the request's model;
// `auth`: the API key and the CA of an https API. A refused request's error is the server's body.
RequestRecord RunOpenAiRequest(const std::string& http_addr, const std::string& model,
                               const RequestShape& shape, const LevelOptions& options,
                               const ClientAuth& auth);

}  // namespace tessera::bench
