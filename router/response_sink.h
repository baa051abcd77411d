// Where the engine sends a request's responses: implemented by the Generate RPC's reactor (and by
// tests). The engine calls Send for each partial response and Close exactly once.
//
// Threading: called only from the engine thread; implementations hand the messages to their own
// I/O threads and must never block on the client.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include "absl/status/status.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router {

// Backpressure bounds (issue 15): a sink holding this many unsent responses, or this many bytes of
// them, is backlogged; it drains again at half of both.
inline constexpr size_t kMaxUnsentResponses = 256;
inline constexpr size_t kMaxUnsentBytes = size_t{1} << 20;

class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // Backpressure. True while the client has more unsent output than the bounds above; the engine
  // then stops scheduling the request (it keeps its KV) and calls NotifyWhenDrained.
  virtual bool Backlogged() const { return false; }
  // `on_drained` is called once, from any thread (at once when already drained), when the unsent
  // output has fallen to half the bounds. It must only queue work for the engine.
  virtual void NotifyWhenDrained(std::function<void()> on_drained) { on_drained(); }
  // When the client last took a response (steady clock; construction counts), for the engine's
  // stream-stall timeout.
  virtual std::chrono::steady_clock::time_point LastRead() const {
    return std::chrono::steady_clock::now();
  }
  virtual void Send(::tessera::v1::GenerateResponse response) = 0;
  // `last` (when it has content) goes out before the stream ends with `status`.
  virtual void Close(::tessera::v1::GenerateResponse last, absl::Status status) = 0;
};

}  // namespace tessera::router
