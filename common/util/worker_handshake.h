// The Run stream's acceptance handshake between tessera-router (and tessera-localai) and
// tessera-worker (proto/tessera/worker/v1/worker.proto).
//
// A worker serves one Run stream at a time and refuses others (FAILED_PRECONDITION) or callers
// without its secret (UNAUTHENTICATED). A refusal ends the call, but the client's Run() returns
// before it knows, so it could count itself connected to a worker that serves someone else. The
// worker therefore sends initial metadata `kRunAcceptedMetadata: 1` as soon as it has taken the
// stream, and the client counts as connected only once it has read that key.
//
// Threading: constants only.
#pragma once

namespace tessera::util {

inline constexpr char kRunAcceptedMetadata[] = "tessera-run-accepted";

}  // namespace tessera::util
