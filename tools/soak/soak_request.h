// One soak request: what the client does (its Behaviour, drawn from the options' mix) and how its
// stream ended. RunSoakRequest plays it over the real gRPC API, blocking the calling thread.
//
// Behaviours:
//   kPlain      read every response as it comes;
//   kCancel     cancel the call after a random number of tokens (0 .. max_tokens - 1);
//   kSlow       pause before every read (a slow reader: the router's backpressure holds it);
//   kMalformed  half bytes that do not parse as a GenerateRequest (sent through the generic
//               stub: invalid UTF-8 in a string, a truncated field), half a well-formed request
//               over a field limit (a 300-byte request_id);
//   kHttpSlowReader, kHttpDisconnect, kHttpSlowSender
//               the same requests through the OpenAI HTTP door by a hostile client
//               (http_door.h: slow or stalled readers, clients that leave mid-request, slow or
//               stalled senders).
//
// Threading: PlanSoakRequest and RunSoakRequest are pure/thread-compatible; each client thread
// uses its own stubs.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "tessera/v1/tessera.grpc.pb.h"
#include "tools/soak/soak_options.h"

namespace tessera::soak {

enum class Behaviour {
  kPlain,
  kCancel,
  kSlow,
  kMalformed,
  kHttpSlowReader,
  kHttpDisconnect,
  kHttpSlowSender
};
inline constexpr int kNumBehaviours = 7;
const char* BehaviourName(Behaviour b);

struct SoakRequest {
  Behaviour behaviour = Behaviour::kPlain;
  ::tessera::v1::GenerateRequest request;
  int cancel_after_tokens = 0;  // kCancel
  bool raw_bytes = false;       // kMalformed: unparseable bytes rather than a field over a limit
  std::string bytes;            // kMalformed with raw_bytes
  bool request_stream = true;   // HTTP: stream: true (the slow reader always streams)
  bool stall = false;           // kHttpSlowReader: stops reading; kHttpSlowSender: stops sending
  int disconnect_after_ms = 0;  // kHttpDisconnect
};

// Request number `index` of a run with these options (deterministic in seed and index).
SoakRequest PlanSoakRequest(const SoakOptions& options, int index, bool warmup);

struct SoakOutcome {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
  int tokens = 0;
  bool finished_reason_seen = false;  // a last response carried a finish reason
};

SoakOutcome RunSoakRequest(const SoakRequest& plan, const SoakOptions& options,
                           ::tessera::v1::Tessera::Stub& stub, grpc::GenericStub& generic);

// Whether `code` is a legitimate end for a request with this behaviour: OK / CANCELLED for
// streams, the documented refusals (UNIMPLEMENTED for unparseable bytes, INVALID_ARGUMENT over a
// limit) for malformed ones, and UNAVAILABLE only when `during_kill` (the request was in flight
// while the worker was dead: soak_report.h). Anything else (a deadline = a hang, INTERNAL,
// UNKNOWN, UNAVAILABLE with the worker up) is a failed check.
bool ExpectedEnd(const SoakRequest& plan, grpc::StatusCode code, bool during_kill);

}  // namespace tessera::soak
