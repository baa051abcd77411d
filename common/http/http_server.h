// HttpServer: tessera's event-driven HTTP/1.1 server (Boost.Beast over Asio), behind the router's
// OpenAI API and both processes' metrics ports. Why not cpp-httplib (DESIGN §8): it gives every
// connection a pool thread from accept to close, so a few hundred clients that trickle their
// headers hold every thread and /health stops answering; it has no total deadline for a request
// head or body, and no cap on header count. Here a connection holds a thread only while a
// complete request runs:
//   * one I/O thread accepts, does TLS handshakes and reads each request under caps and TOTAL
//     deadlines: handshake + head within `header_timeout` (`keep_alive_timeout` for a later
//     request on the connection), body within `body_timeout`; target, header bytes and header
//     count capped (414, 431); a Content-Length over `max_body_bytes` is refused (413) before a
//     byte of body is read, and so is a request its route's `admit` refuses (e.g. 401); the body
//     bytes all connections hold at once are capped, per client too (503 past a cap);
//   * connections are capped in all and per client IP (over a cap: 503, closed);
//   * routes marked kInline (health, models, metrics: quick, non-blocking) run on the I/O thread,
//     so they answer however many streams are open; kPool routes run on a bounded HandlerPool
//     and answer through a Responder (responder.h) while the I/O thread watches for the client
//     leaving (EOF) and writes the bytes;
//   * requests on a connection are answered in order (a pipelined request is read only after
//     the previous answer); an HTTP/1.0 request gets an HTTP/1.0 answer.
// Errors the server raises itself (400, 404, 405, 413, 414, 431, 503) go through
// `error_response`, so each door answers in its own format. The port is bound exclusively
// (SO_REUSEADDR for restarts, never SO_REUSEPORT).
//
// Threading: Start/Stop/the destructor from one owner thread. Route callbacks run on the I/O
// thread (kInline, and every `admit`) or on a pool thread (kPool, concurrently).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/http/http_message.h"
#include "common/http/responder.h"

namespace tessera::http {

struct ServerLimits {
  std::chrono::milliseconds header_timeout{10'000};      // handshake + first request head
  std::chrono::milliseconds keep_alive_timeout{30'000};  // idle + head of a later request
  std::chrono::milliseconds body_timeout{60'000};        // the whole body
  std::chrono::milliseconds write_timeout{60'000};       // a client that takes no bytes
  size_t max_body_bytes = size_t{32} << 20;
  // Body bytes all connections may hold at once, a client at most a quarter of it (503 past
  // either; body_budget.h): bounds what clients sending many large bodies make the server buffer.
  size_t max_pending_body_bytes = size_t{256} << 20;
  size_t max_target_bytes = 8 << 10;   // 414 beyond
  size_t max_header_bytes = 64 << 10;  // 431 beyond (the header fields, the target apart)
  size_t max_header_count = 100;       // 431 beyond
  int max_connections = 2048;
  int max_connections_per_client = 512;
  size_t max_unsent_bytes = size_t{1} << 20;  // a streaming route blocks beyond (responder.h)
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;            // 0 = any free port (see HttpServer::port())
  std::string tls_cert;    // PEM files; both set = HTTPS
  std::string tls_key;
  int pool_threads = 4;    // threads for kPool routes (concurrent blocking requests)
  size_t max_queued = 0;   // kPool requests waiting for a thread; 0 = 4 x pool_threads
  ServerLimits limits;
  // The server's own error answers (status, a message for a person). Default: plain text.
  std::function<Response(int status, const std::string& message)> error_response;
};

enum class Execution { kInline, kPool };

struct Route {
  std::string method;  // "GET", "POST"
  std::string path;    // exact match on the path (query ignored)
  Execution execution = Execution::kInline;
  // Called on the I/O thread with the request head (no body yet): a response here answers the
  // request instead, and the body is never read (the connection closes). Null = admit all.
  std::function<std::optional<Response>(const Request& head)> admit;
  // Answers through the responder; a route that returns without answering gets a 500.
  std::function<void(const Request& request, Responder& responder)> handle;
};

class HttpServer {
 public:
  // Binds and starts serving. INVALID_ARGUMENT for bad options or TLS files (named);
  // UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(ServerOptions options,
                                                           std::vector<Route> routes);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Stops accepting, closes every connection (running routes see their client gone), waits
  // for the routes to return and joins the threads. Idempotent.
  void Stop();

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::http
