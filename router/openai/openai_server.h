// The router's OpenAI-compatible HTTP API (router --http-port, default 8080), on tessera's
// event-driven HTTP server (common/http/http_server.h):
//
//   POST /v1/completions, POST /v1/chat/completions  (JSON, or SSE with "stream": true)
//   GET  /v1/models, GET /health, POST /tokenize, POST /detokenize
//   GET  /metrics  (when options.metrics is set: the router's Prometheus series, the same text
//                   as the --metrics-port server's, so an inference gateway's endpoint picker,
//                   which scrapes the pool's target port, finds them; never needs the API key)
//   GET  /, /console/*, /v1/console/events  (when options.console_feed is set: the web console,
//                   router/console/console_routes.h; its events need the API key)
//
// Requests are parsed (openai_request.h), turned into the public API's GenerateRequest and
// admitted by the same BuildRequest as gRPC Generate, then submitted to the engine as one
// request per choice (completion_job.h). Errors, the HTTP server's own (400, 404, 405, 413, 414,
// 431, 503) included, are OpenAI error objects with their HTTP status (openai_response.h). With
// an API key, every route but /health answers 401 (with `WWW-Authenticate: Bearer`) unless the
// request head carries `Authorization: Bearer <key>` (scheme in any case, key compared in
// constant time); the key is checked before a byte of the body is read. With a certificate and
// key it serves HTTPS.
//
// Threading: the HTTP server's I/O thread answers /health and /v1/models itself, so they answer
// however busy the rest is; generation and (de)tokenization run on `threads` handler threads,
// which talk to the engine only through Engine::Submit/Cancel and its thread-safe getters. A
// streaming or waiting handler holds its thread until the request ends or its client leaves
// (which cancels the request); requests beyond `threads` wait in a bounded queue.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/http_server.h"
#include "prometheus/collectable.h"
#include "router/console/step_feed.h"
#include "router/request_engine.h"
#include "router/model_frontend.h"

namespace tessera::router::openai {

struct OpenAiServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;    // 0 = any free port (the router maps its --http-port -1 here)
  int threads = 128;  // handler threads = concurrent generation requests served
  std::string api_key;   // "" = none; else every route but /health needs `Bearer <key>`
  std::string tls_cert;  // PEM files; both set = HTTPS
  std::string tls_key;
  // Deadlines and caps against slow or hostile clients. Its write_timeout is the router's
  // --stream-stall-timeout: a client that accepts no bytes for that long is dropped (and its
  // request cancelled), as on gRPC streams.
  http::ServerLimits limits;
  // Served as GET /metrics on this port too; null = no such route.
  std::shared_ptr<prometheus::Collectable> metrics;
  // The web console's step feed (borrowed; outlives the server); null = no console.
  console::StepFeed* console_feed = nullptr;
};

class OpenAiServer {
 public:
  // Binds and starts serving; errors name the address.
  static absl::StatusOr<std::unique_ptr<OpenAiServer>> Start(const OpenAiServerOptions& options,
                                                             RequestEngine* engine,
                                                             const ModelFrontend* model);

  int port() const { return server_->port(); }
  // Stops accepting, ends open connections (their requests are cancelled), joins the threads.
  void Stop() { server_->Stop(); }

 private:
  explicit OpenAiServer(std::unique_ptr<http::HttpServer> server) : server_(std::move(server)) {}

  std::unique_ptr<http::HttpServer> server_;
};

}  // namespace tessera::router::openai
