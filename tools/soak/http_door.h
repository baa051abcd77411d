// The soak's hostile clients of the OpenAI HTTP door (issue 23): each plays one request over a
// raw HTTP/1.1 connection (http_connection.h) to `tessera serve`'s HTTP port and reports how it
// ended as a SoakOutcome, so the report tallies it with the gRPC behaviours.
//
//   kHttpSlowReader   a streaming completion read in small pieces with --slow-delay-ms between
//                     (a 4 KiB receive buffer keeps the backlog in the server); half of them stop
//                     reading after the response head, hold the connection --http-stall-ms, then
//                     leave (CANCELLED);
//   kHttpDisconnect   a streaming or non-streaming completion whose client closes the socket
//                     after 0..300 ms (CANCELLED, or the answer's status when it came first);
//   kHttpSlowSender   the request head and body sent in 8 pieces --slow-delay-ms apart (then
//                     answered as usual); a quarter of them send half the head and stop: the
//                     door must close the connection (EOF or a 408/400 = OK; still open at the
//                     request timeout = DEADLINE_EXCEEDED, a failed check).
//
// An answer maps to a gRPC code: 200 with the whole body (`data: [DONE]` for a stream, "choices"
// otherwise) = OK; 503 or an error event naming service_unavailable = UNAVAILABLE (the worker was
// killed); 429 = RESOURCE_EXHAUSTED; anything else = UNKNOWN with the first bytes as message.
//
// Threading: thread-compatible; each call uses its own connection.
#pragma once

#include <string>

#include "tools/soak/soak_options.h"
#include "tools/soak/soak_request.h"

namespace tessera::soak {

bool IsHttpBehaviour(Behaviour b);

SoakOutcome RunHttpDoorRequest(const SoakRequest& plan, const SoakOptions& options,
                               const std::string& http_address);

// The JSON body of `plan.request` as an OpenAI completion (text) or chat completion; *path gets
// its route.
std::string HttpRequestBody(const SoakRequest& plan, std::string* path);

}  // namespace tessera::soak
