// What the API frontends (gRPC Generate, OpenAI HTTP, LocalAI) need from the router's core: submit
// a validated request, cancel it, drain, and read the worker's description and the queues. One
// worker's core is an Engine (engine.h); several workers behind one router are an EngineGroup
// (engine_group.h), which routes each new request to one of its engines (DESIGN.md §12).
//
// Threading: every method is safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "router/request_builder.h"
#include "router/response_sink.h"
#include "tessera/worker/v1/worker.pb.h"

namespace tessera::router {

namespace wv1 = ::tessera::worker::v1;

struct EngineStats {
  int requests_running = 0;
  int requests_waiting = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_cached = 0;  // free blocks the prefix cache still indexes
  bool worker_connected = false;
  int worker_active_slots = 0;
  uint64_t steps = 0;
  uint64_t preemptions = 0;
  // Prefix cache, since the worker connected: tokens looked up at admission, tokens served.
  uint64_t prefix_cache_query_tokens = 0;
  uint64_t prefix_cache_hit_tokens = 0;
};

// One worker behind the core: an Engine has one, an EngineGroup one per --worker, in order.
struct WorkerStatus {
  int index = 0;
  std::string address;  // HOST:PORT the router dials
  bool serving = false;  // new requests may go to it (connected, not draining)
  EngineStats stats;
  std::optional<wv1::DescribeResponse> description;  // as it last described itself
};

class RequestEngine {
 public:
  virtual ~RequestEngine() = default;

  // Starts the core's thread(s) and worker connection(s); Stop ends them (idempotent), failing
  // what is left.
  virtual void Start() = 0;
  virtual void Stop() = 0;

  // Queues a validated request; every outcome (tokens, errors such as a full queue) reaches the
  // sink. Returns the id Cancel takes. At `deadline` a request not finished yet is cancelled
  // with DEADLINE_EXCEEDED.
  virtual uint64_t Submit(
      ValidatedRequest request, std::shared_ptr<ResponseSink> sink,
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt) = 0;
  virtual void Cancel(uint64_t id) = 0;
  // Stop admitting (new requests get UNAVAILABLE); requests in flight continue until `deadline`.
  virtual void BeginDrain(std::chrono::steady_clock::time_point deadline) = 0;
  // True once draining and no request is left.
  virtual bool Drained() const = 0;
  // A connected worker's description (the model's limits); empty until one has connected.
  virtual std::optional<wv1::DescribeResponse> worker() const = 0;
  // Whether a new request can be served now (a worker connected, not draining).
  virtual bool serving() const = 0;
  virtual EngineStats stats() const = 0;
  virtual std::vector<WorkerStatus> workers() const = 0;
};

}  // namespace tessera::router
