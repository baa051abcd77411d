// MetricsServer: a small HTTP server (cpp-httplib) for Prometheus and orchestrators, separate
// from the gRPC port (DESIGN.md §7):
//   GET /metrics  the text exposition (format 0.0.4) of a prometheus-cpp core registry;
//   GET /healthz  200 "ok" while the process serves HTTP at all (liveness);
//   GET /readyz   200 "ready" when the readiness callback returns OK, else 503 with its message
//                 on one line (readiness: e.g. "no worker connected").
// Why not prometheus-cpp's own Exposer (prometheus-cpp::pull): its civetweb threads get stacks too
// small for the static TLS cuBLAS brings into the process; httplib's threads are plain
// std::threads with the default stack.
//
// Threading: Start/Stop/the destructor from one owner thread. Requests are answered on the
// server's own threads (`num_threads` workers plus one accept thread), which call
// Collectable::Collect (prometheus-cpp metrics are thread-safe) and the readiness callback.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace tessera::metrics {

inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

struct MetricsServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = any free port (see MetricsServer::port())
  // OK = ready. Called on a server thread for every /readyz: must be thread-safe and quick.
  // Null = always ready.
  std::function<absl::Status()> readiness = nullptr;
  // Request threads. A scraper keeps its connection alive and holds one thread between scrapes.
  int num_threads = 4;
};

// Everything `collectable` holds, in the text exposition format.
std::string RenderMetrics(const prometheus::Collectable& collectable);

class MetricsServer {
 public:
  // Binds host:port and starts serving. INVALID_ARGUMENT for bad options (port outside
  // [0, 65535], num_threads < 1, no collectable); UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      std::shared_ptr<prometheus::Collectable> collectable, MetricsServerOptions options);

  ~MetricsServer();  // Stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Stops accepting, finishes the requests in progress and joins the threads. Idempotent.
  void Stop();

  const std::string& host() const { return options_.host; }
  int port() const { return port_; }  // the bound port (never 0)

 private:
  class Impl;
  MetricsServer(MetricsServerOptions options, std::unique_ptr<Impl> impl, int port);

  const MetricsServerOptions options_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace tessera::metrics
