// Where the engine sends a request's responses: implemented by the Generate RPC's reactor (and by
// tests). The engine calls Send for each partial response and Close exactly once.
//
// Threading: called only from the engine thread; implementations hand the messages to their own
// I/O threads and must never block on the client.
#pragma once

#include "absl/status/status.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router {

class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  virtual void Send(::tessera::v1::GenerateResponse response) = 0;
  // `last` (when it has content) goes out before the stream ends with `status`.
  virtual void Close(::tessera::v1::GenerateResponse last, absl::Status status) = 0;
};

}  // namespace tessera::router
