// Starting a common/http server for tests, with routes that show what the server did.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "common/http/http_server.h"

namespace tessera::http::testing {

inline std::unique_ptr<HttpServer> StartOrDie(ServerOptions options, std::vector<Route> routes) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(std::move(options), std::move(routes));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

inline Route Text(std::string method, std::string path, std::string body,
                  Execution execution = Execution::kInline) {
  return Route{.method = std::move(method),
               .path = std::move(path),
               .execution = execution,
               .handle = [body](const Request&, Responder& responder) {
                 responder.Send(Response{.body = body});
               }};
}

// A POST route that echoes the body's size.
inline Route EchoSize(std::string path, Execution execution = Execution::kPool) {
  return Route{.method = "POST",
               .path = std::move(path),
               .execution = execution,
               .handle = [](const Request& request, Responder& responder) {
                 responder.Send(Response{.body = std::to_string(request.body.size())});
               }};
}

// Waits (bounded) until `condition` holds.
template <class Condition>
bool Eventually(Condition condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace tessera::http::testing
