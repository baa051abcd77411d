// The router's OpenAI-compatible HTTP API on cpp-httplib (router --http-port, default 8080):
//
//   POST /v1/completions, POST /v1/chat/completions  (JSON, or SSE with "stream": true)
//   GET  /v1/models, GET /health, POST /tokenize, POST /detokenize
//
// Requests are parsed (openai_request.h), turned into the public API's GenerateRequest and
// admitted by the same BuildRequest as gRPC Generate, then submitted to the engine as one
// request per choice (completion_job.h). Errors are OpenAI error objects with their HTTP status
// (openai_response.h). With an API key, every route but /health answers 401 without
// `Authorization: Bearer <key>`; with a certificate and key it serves HTTPS.
//
// Threading: cpp-httplib's listener thread plus a pool of `threads` handler threads; a handler
// talks to the engine only through Engine::Submit/Cancel and its thread-safe getters, and a
// streaming handler holds its pool thread while it streams (so `threads` bounds the concurrent
// streams; more wait for a thread).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "router/engine.h"
#include "router/model_frontend.h"

namespace httplib {
class Server;
}

namespace tessera::router::openai {

struct OpenAiServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;    // 0 = any free port (the router maps its --http-port -1 here)
  int threads = 128;  // handler threads = concurrent requests served
  std::string api_key;   // "" = none; else every route but /health needs `Bearer <key>`
  std::string tls_cert;  // PEM files; both set = HTTPS
  std::string tls_key;
  // A streaming response whose client accepts no bytes for this long is dropped (the request is
  // cancelled): the router's --stream-stall-timeout, as on gRPC streams (httplib's own default
  // would be 5 s).
  double write_timeout_s = 60;
};

class OpenAiServer {
 public:
  // Binds and starts serving; errors name the address.
  static absl::StatusOr<std::unique_ptr<OpenAiServer>> Start(const OpenAiServerOptions& options,
                                                             Engine* engine,
                                                             const ModelFrontend* model);
  ~OpenAiServer();  // Stop()

  int port() const { return port_; }
  // Stops accepting, ends open connections, joins the listener.
  void Stop();

 private:
  OpenAiServer() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace tessera::router::openai
