// One Generate call: a gRPC callback-API write reactor plus the ResponseSink the engine writes
// into. The sink queues responses and keeps exactly one write outstanding, so a slow client never
// blocks the engine; after the client cancels or disconnects, the engine is told (Cancel) and
// whatever it still sends is dropped.
//
// Threading: the sink is called from the engine thread, the reactor callbacks from gRPC threads;
// one mutex orders them. The reactor deletes itself in OnDone; the sink (shared with the engine)
// may outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <deque>
#include <memory>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "router/request_engine.h"
#include "router/response_sink.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router {

class GenerateStream final : public grpc::ServerWriteReactor<::tessera::v1::GenerateResponse> {
 public:
  // Finishes at once with `rejection` when it is not OK; otherwise submits `request` with the
  // client's deadline (Engine::Submit).
  GenerateStream(RequestEngine* engine, absl::StatusOr<ValidatedRequest> request,
                 std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Sink;
  RequestEngine* engine_;
  std::shared_ptr<Sink> sink_;
  uint64_t id_ = 0;
};

}  // namespace tessera::router
