#include "common/http/http_server.h"

#include <sys/socket.h>

#include <future>
#include <thread>
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/strings/str_cat.h"
#include "common/http/http_session.h"
#include "common/http/server_core.h"
#include "common/http/wire_format.h"

namespace tessera::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// After a failed accept (out of descriptors, ...), wait this long before the next, rather than
// spinning.
constexpr std::chrono::milliseconds kAcceptRetryDelay{50};

absl::Status CheckOptions(const ServerOptions& options) {
  const ServerLimits& limits = options.limits;
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port must be in [0, 65535], got ",
                                                   options.port));
  }
  if (options.pool_threads < 1) return absl::InvalidArgumentError("HTTP threads must be >= 1");
  if (limits.max_connections < 1 || limits.max_connections_per_client < 1) {
    return absl::InvalidArgumentError("HTTP connection caps must be >= 1");
  }
  if (limits.header_timeout.count() <= 0 || limits.body_timeout.count() <= 0 ||
      limits.keep_alive_timeout.count() <= 0 || limits.write_timeout.count() <= 0) {
    return absl::InvalidArgumentError("HTTP timeouts must be > 0");
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  return absl::OkStatus();
}

Response PlainError(int status, const std::string& message) {
  Response response;
  response.status = status;
  response.body = message + "\n";
  return response;
}

}  // namespace

ServerCore::ServerCore(ServerOptions options_in, std::vector<Route> routes_in)
    : options(std::move(options_in)),
      routes(std::move(routes_in)),
      connection_limits(ConnectionLimits::Create(options.limits.max_connections,
                                                 options.limits.max_connections_per_client)),
      body_budget(options.limits.max_pending_body_bytes),
      pool(options.pool_threads,
           options.max_queued > 0 ? options.max_queued : 4 * size_t(options.pool_threads)) {}

const Route* ServerCore::FindRoute(const std::string& method, const std::string& path,
                                   bool* path_known) const {
  *path_known = false;
  for (const Route& route : routes) {
    if (route.path != path) continue;
    *path_known = true;
    if (route.method == method) return &route;
  }
  return nullptr;
}

Response ServerCore::Error(int status, const std::string& message) const {
  return options.error_response ? options.error_response(status, message)
                                : PlainError(status, message);
}

class HttpServer::Impl {
 public:
  Impl(ServerOptions options, std::vector<Route> routes)
      : core_(std::move(options), std::move(routes)),
        acceptor_(core_.io),
        over_capacity_(FormatResponse(core_.Error(503, "too many connections; retry later"),
                                      /*version=*/11, /*keep_alive=*/false)) {}

  absl::Status Listen() {
    if (!core_.options.tls_cert.empty()) {
      if (absl::Status tls = LoadTls(); !tls.ok()) return tls;
    }
    boost::system::error_code ec;
    tcp::resolver resolver(core_.io);
    auto endpoints = resolver.resolve(core_.options.host, std::to_string(core_.options.port),
                                      tcp::resolver::passive, ec);
    if (!ec && endpoints.empty()) ec = net::error::host_not_found;
    if (!ec) {
      const tcp::endpoint endpoint = endpoints.begin()->endpoint();
      acceptor_.open(endpoint.protocol(), ec);
      // SO_REUSEADDR (a restart reuses a port in TIME_WAIT), never SO_REUSEPORT (which would
      // let another process share the port and its connections).
      if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec) acceptor_.bind(endpoint, ec);
      if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", core_.options.host, ":",
                                                 core_.options.port, ": ", ec.message()));
    }
    port_ = acceptor_.local_endpoint().port();
    return absl::OkStatus();
  }

  void Run() {
    Accept();
    thread_ = std::thread([this] { core_.io.run(); });
  }

  void Stop() {
    if (!thread_.joinable()) return;
    std::promise<void> closed;
    net::post(core_.io, [this, &closed] {
      core_.stopping = true;
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      CloseConnections();
      closed.set_value();
    });
    closed.get_future().wait();
    core_.pool.Stop();  // routes see their clients gone and return
    work_.reset();
    core_.io.stop();
    thread_.join();
    CloseConnections();  // any a route's last answer kept open; the I/O thread has ended
  }

  int port() const { return port_; }

 private:
  // Closes every open connection. On the I/O thread, or after it has ended.
  void CloseConnections() {
    std::vector<std::shared_ptr<Connection>> open;  // closing may end one: not while iterating
    for (auto& [raw, weak] : core_.connections) {
      if (std::shared_ptr<Connection> connection = weak.lock()) open.push_back(connection);
    }
    for (const std::shared_ptr<Connection>& connection : open) connection->Close();
  }

  absl::Status LoadTls() {
    core_.tls.emplace(net::ssl::context::tls_server);
    core_.tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                           net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                           net::ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    core_.tls->use_certificate_chain_file(core_.options.tls_cert, ec);
    if (!ec) core_.tls->use_private_key_file(core_.options.tls_key, net::ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot use the TLS certificate ", core_.options.tls_cert, " with key ",
          core_.options.tls_key, ": ", ec.message()));
    }
    return absl::OkStatus();
  }

  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (core_.stopping || !acceptor_.is_open()) return;
      if (ec) {
        retry_.expires_after(kAcceptRetryDelay);
        retry_.async_wait([this](boost::system::error_code) { Accept(); });
        return;
      }
      OnAccepted(std::move(socket));
      Accept();
    });
  }

  void OnAccepted(tcp::socket socket) {
    boost::system::error_code ec;
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    if (ec) return;
    std::string peer = remote.address().to_string();
    std::optional<ConnectionLimits::Slot> slot = core_.connection_limits->TryAcquire(peer);
    if (!slot.has_value()) {
      // Over a cap: a plain-HTTP client gets a best-effort 503 (never waiting on it).
      if (!core_.tls.has_value()) {
        ::send(socket.native_handle(), over_capacity_.data(), over_capacity_.size(),
               MSG_DONTWAIT | MSG_NOSIGNAL);
      }
      socket.close(ec);
      return;
    }
    StartSession(&core_, std::move(socket), *std::move(slot), std::move(peer));
  }

  ServerCore core_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_{core_.io};
  net::executor_work_guard<net::io_context::executor_type> work_ =
      net::make_work_guard(core_.io);
  std::thread thread_;
  int port_ = 0;
  const std::string over_capacity_;  // the whole answer to a connection over a cap
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(ServerOptions options,
                                                              std::vector<Route> routes) {
  if (absl::Status valid = CheckOptions(options); !valid.ok()) return valid;
  auto impl = std::make_unique<Impl>(std::move(options), std::move(routes));
  if (absl::Status listening = impl->Listen(); !listening.ok()) return listening;
  impl->Run();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port(); }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace tessera::http
