// Rate-limits libprotobuf's own log lines in the router (issue 15, item 5).
//
// A request whose bytes do not parse (a string field with invalid UTF-8, a truncated field) is
// refused by gRPC before any handler of ours runs: gRPC C++ 1.51's callback server has no hook to
// answer it, so the client gets the library's status (UNIMPLEMENTED with an empty message, as
// gRPC finishes a call whose request could not be deserialized) and libprotobuf writes one ERROR
// line per such request to stderr, which a client could use to flood the log. This replaces
// libprotobuf's log handler with one that prints at most one line per `interval`, each followed
// by how many lines were dropped since the last one; FATAL lines always print.
//
// Threading: protobuf may log from any gRPC thread; the handler serializes on a mutex.
// Call once from main() before serving (protobuf's handler is process-wide).
#pragma once

#include "absl/time/time.h"

namespace tessera::router {

void InstallProtobufLogLimit(absl::Duration interval);

// For tests: offers one line to the limiter as libprotobuf would; true when it was printed.
bool OfferProtobufLogLine(const char* message);

}  // namespace tessera::router
