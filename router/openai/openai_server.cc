#include "router/openai/openai_server.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics/metrics_server.h"
#include "router/console/console_routes.h"
#include "router/openai/openai_handlers.h"
#include "router/openai/openai_response.h"

namespace tessera::router::openai {
namespace {

using http::Execution;
using http::Request;
using http::Responder;
using http::Route;

// A route whose handler is `method` of the shared handlers; `guarded` routes need the API key.
template <class Method>
Route RouteTo(std::string verb, std::string path, Execution execution, bool guarded,
              std::shared_ptr<OpenAiHandlers> handlers, Method method) {
  Route route;
  route.method = std::move(verb);
  route.path = std::move(path);
  route.execution = execution;
  if (guarded) {
    route.admit = [handlers](const Request& head) { return handlers->Admit(head); };
  }
  route.handle = [handlers, method](const Request& request, Responder& responder) {
    ((*handlers).*method)(request, responder);
  };
  return route;
}

// GET /metrics: the text exposition of `metrics`, answered on the I/O thread like /health.
Route MetricsRoute(std::shared_ptr<prometheus::Collectable> metrics) {
  Route route;
  route.method = "GET";
  route.path = "/metrics";
  route.execution = Execution::kInline;
  route.handle = [metrics = std::move(metrics)](const Request&, Responder& responder) {
    http::Response response;
    response.status = 200;
    response.content_type = tessera::metrics::kExpositionContentType;
    response.body = tessera::metrics::RenderMetrics(*metrics);
    responder.Send(std::move(response));
  };
  return route;
}

std::vector<Route> RoutesOf(const std::shared_ptr<OpenAiHandlers>& handlers,
                            const OpenAiServerOptions& options, const RequestEngine* engine) {
  using H = OpenAiHandlers;
  std::vector<Route> routes = {
      RouteTo("POST", "/v1/completions", Execution::kPool, true, handlers, &H::Completions),
      RouteTo("POST", "/v1/chat/completions", Execution::kPool, true, handlers,
              &H::ChatCompletions),
      RouteTo("GET", "/v1/models", Execution::kInline, true, handlers, &H::Models),
      RouteTo("GET", "/health", Execution::kInline, false, handlers, &H::Health),
      RouteTo("POST", "/tokenize", Execution::kPool, true, handlers, &H::Tokenize),
      RouteTo("POST", "/detokenize", Execution::kPool, true, handlers, &H::Detokenize),
  };
  if (options.metrics != nullptr) routes.push_back(MetricsRoute(options.metrics));
  if (options.console_feed != nullptr) {
    for (Route& route : console::ConsoleRoutes(
             options.console_feed, engine, !options.api_key.empty(),
             [handlers](const Request& head) { return handlers->Admit(head); })) {
      routes.push_back(std::move(route));
    }
  }
  return routes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpenAiServer>> OpenAiServer::Start(
    const OpenAiServerOptions& options, RequestEngine* engine, const ModelFrontend* model) {
  if (options.threads < 1) return absl::InvalidArgumentError("--http-threads must be >= 1");
  auto handlers = std::make_shared<OpenAiHandlers>(engine, model, options.api_key);
  http::ServerOptions server{
      .host = options.host,
      .port = options.port,
      .tls_cert = options.tls_cert,
      .tls_key = options.tls_key,
      .pool_threads = options.threads,
      .max_queued = 0,
      .limits = options.limits,
      .error_response = [](int status, const std::string& message) {
        http::Response response;
        response.status = status;
        response.content_type = kJsonContentType;
        response.body = Dump(HttpErrorBody(status, message));
        return response;
      }};
  absl::StatusOr<std::unique_ptr<http::HttpServer>> started =
      http::HttpServer::Start(std::move(server), RoutesOf(handlers, options, engine));
  if (!started.ok()) {
    if (started.status().code() != absl::StatusCode::kUnavailable) return started.status();
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP: ",
                                               started.status().message()));
  }
  return std::unique_ptr<OpenAiServer>(new OpenAiServer(*std::move(started)));
}

}  // namespace tessera::router::openai
