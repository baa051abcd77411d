#include "common/metrics/metrics_server.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "prometheus/text_serializer.h"

namespace tessera::metrics {
namespace {

http::Response Text(int status, std::string body, std::string content_type = "text/plain") {
  http::Response response;
  response.status = status;
  response.content_type = std::move(content_type);
  response.body = std::move(body);
  return response;
}

http::Route Get(std::string path, std::function<http::Response()> answer) {
  http::Route route;
  route.method = "GET";
  route.path = std::move(path);
  route.execution = http::Execution::kInline;  // quick, and never behind a busy thread
  route.handle = [answer = std::move(answer)](const http::Request&, http::Responder& responder) {
    responder.Send(answer());
  };
  return route;
}

std::vector<http::Route> RoutesOf(std::shared_ptr<prometheus::Collectable> collectable,
                                  std::function<absl::Status()> readiness) {
  return {
      Get("/metrics",
          [collectable] {
            return Text(200, RenderMetrics(*collectable), kExpositionContentType);
          }),
      Get("/healthz", [] { return Text(200, "ok\n"); }),
      Get("/readyz",
          [readiness] {
            const absl::Status ready = readiness ? readiness() : absl::OkStatus();
            if (ready.ok()) return Text(200, "ready\n");
            // One line, so probes and logs show the whole reason.
            return Text(503,
                        absl::StrCat(absl::StrReplaceAll(ready.message(), {{"\n", " "}}), "\n"));
          }),
  };
}

}  // namespace

http::ServerLimits DefaultMetricsLimits() {
  http::ServerLimits limits;
  limits.max_body_bytes = 64 << 10;
  limits.max_connections = 256;
  limits.max_connections_per_client = 64;
  return limits;
}

std::string RenderMetrics(const prometheus::Collectable& collectable) {
  return prometheus::TextSerializer().Serialize(collectable.Collect());
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    std::shared_ptr<prometheus::Collectable> collectable, MetricsServerOptions options) {
  if (collectable == nullptr) return absl::InvalidArgumentError("metrics server: no registry");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port must be in [0, 65535], got ", options.port));
  }
  http::ServerOptions server;
  server.host = options.host;
  server.port = options.port;
  server.pool_threads = 1;  // every route is inline
  server.limits = options.limits;
  absl::StatusOr<std::unique_ptr<http::HttpServer>> started = http::HttpServer::Start(
      std::move(server), RoutesOf(std::move(collectable), std::move(options.readiness)));
  if (!started.ok()) {
    if (started.status().code() != absl::StatusCode::kUnavailable) return started.status();
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", options.host, ":", options.port, ": ",
                     started.status().message()));
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(options.host, *std::move(started)));
}

}  // namespace tessera::metrics
