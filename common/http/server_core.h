// ServerCore: what every connection of one HttpServer shares (http_server.h): the I/O context,
// TLS context, routes, limits, handler pool and the registry of open connections that Stop
// closes. Internal to common/http.
//
// Threading: the registry, `stopping` and every connection are touched only on the I/O thread
// (or by the owner after that thread was joined); routes and options are immutable; the pool and
// the connection limits are thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/http/body_budget.h"
#include "common/http/connection_limits.h"
#include "common/http/handler_pool.h"
#include "common/http/http_server.h"

namespace tessera::http {

// The part of a connection the server needs to close it.
class Connection {
 public:
  virtual ~Connection() = default;
  // Closes the socket at once; a running route sees its client gone. I/O thread only.
  virtual void Close() = 0;
};

struct ServerCore {
  ServerCore(ServerOptions options, std::vector<Route> routes);

  // The route for `method` + `path`; `path_known` tells 404 from 405 when there is none.
  const Route* FindRoute(const std::string& method, const std::string& path,
                         bool* path_known) const;
  Response Error(int status, const std::string& message) const;

  const ServerOptions options;
  const std::vector<Route> routes;
  std::optional<boost::asio::ssl::context> tls;  // set when serving HTTPS
  std::shared_ptr<ConnectionLimits> connection_limits;
  BodyBudget body_budget;
  HandlerPool pool;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;
  bool stopping = false;
  // Declared last, so destroyed first: the connections its pending handlers still own leave the
  // registry above while it exists.
  boost::asio::io_context io;
};

}  // namespace tessera::http
