// MetricsServer: the routes Prometheus and orchestrators use, on tessera's event-driven HTTP
// server (common/http/http_server.h), separate from the gRPC port (DESIGN.md §7):
//   GET /metrics  the text exposition (format 0.0.4) of a prometheus-cpp core registry;
//   GET /healthz  200 "ok" while the process serves HTTP at all (liveness);
//   GET /readyz   200 "ready" when the readiness callback returns OK, else 503 with its message
//                 on one line (readiness: e.g. "no worker connected").
// Why not prometheus-cpp's own Exposer (prometheus-cpp::pull): its civetweb threads get stacks too
// small for the static TLS cuBLAS brings into the process; ours are plain std::threads with the
// default stack. The chart probes /healthz on 0.0.0.0, so the same caps and deadlines as the
// OpenAI door hold here: slow or idle connections hold no thread, and /healthz answers however
// many there are.
//
// Threading: Start/Stop/the destructor from one owner thread. Every route is answered on the
// server's one I/O thread, which calls Collectable::Collect (prometheus-cpp metrics are
// thread-safe) and the readiness callback.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/http/http_server.h"
#include "prometheus/collectable.h"

namespace tessera::metrics {

inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// A metrics port takes no bodies and few connections.
http::ServerLimits DefaultMetricsLimits();

struct MetricsServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = any free port (see MetricsServer::port())
  // OK = ready. Called on a server thread for every /readyz: must be thread-safe and quick.
  // Null = always ready.
  std::function<absl::Status()> readiness = nullptr;
  // Deadlines and caps against slow and hostile clients (the defaults suit a metrics port).
  http::ServerLimits limits = DefaultMetricsLimits();
};

// Everything `collectable` holds, in the text exposition format.
std::string RenderMetrics(const prometheus::Collectable& collectable);

class MetricsServer {
 public:
  // Binds host:port and starts serving. INVALID_ARGUMENT for bad options (port outside
  // [0, 65535], no collectable); UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      std::shared_ptr<prometheus::Collectable> collectable, MetricsServerOptions options);

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Stops accepting, closes the connections and joins the thread. Idempotent.
  void Stop() { server_->Stop(); }

  const std::string& host() const { return host_; }
  int port() const { return server_->port(); }  // the bound port (never 0)

 private:
  MetricsServer(std::string host, std::unique_ptr<http::HttpServer> server)
      : host_(std::move(host)), server_(std::move(server)) {}

  const std::string host_;
  std::unique_ptr<http::HttpServer> server_;
};

}  // namespace tessera::metrics
