#include "router/openai/openai_server.h"

#include <httplib.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "router/openai/openai_handlers.h"
#include "router/openai/openai_response.h"

namespace tessera::router::openai {

absl::StatusOr<std::unique_ptr<OpenAiServer>> OpenAiServer::Start(
    const OpenAiServerOptions& options, Engine* engine, const ModelFrontend* model) {
  if (options.threads < 1) return absl::InvalidArgumentError("--http-threads must be >= 1");
  std::unique_ptr<OpenAiServer> server(new OpenAiServer());
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (options.tls_cert.empty()) {
    server->server_ = std::make_unique<httplib::Server>();
  } else {
    auto tls = std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(),
                                                    options.tls_key.c_str());
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot use the TLS certificate ",
                                                     options.tls_cert, " with key ",
                                                     options.tls_key));
    }
    server->server_ = std::move(tls);
  }
  httplib::Server& http = *server->server_;
  const int threads = options.threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  const auto write_timeout = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(options.write_timeout_s));
  http.set_write_timeout(write_timeout.count() / 1000000, write_timeout.count() % 1000000);
  // Owned by the route lambdas (which live as long as the httplib::Server).
  auto handlers = std::make_shared<OpenAiHandlers>(engine, model, options.api_key);
  http.Post("/v1/completions", [handlers](const httplib::Request& req, httplib::Response& res) {
    handlers->Generate(Endpoint::kCompletions, req, res);
  });
  http.Post("/v1/chat/completions",
            [handlers](const httplib::Request& req, httplib::Response& res) {
              handlers->Generate(Endpoint::kChatCompletions, req, res);
            });
  http.Get("/v1/models", [handlers](const httplib::Request& req, httplib::Response& res) {
    handlers->Models(req, res);
  });
  http.Get("/health", [handlers](const httplib::Request& req, httplib::Response& res) {
    handlers->Health(req, res);
  });
  http.Post("/tokenize", [handlers](const httplib::Request& req, httplib::Response& res) {
    handlers->Tokenize(req, res);
  });
  http.Post("/detokenize", [handlers](const httplib::Request& req, httplib::Response& res) {
    handlers->Detokenize(req, res);
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own error object
    const absl::Status status =
        res.status == 404
            ? absl::NotFoundError(absl::StrCat("no route for ", req.method, " ", req.path))
            : absl::UnknownError(absl::StrCat("HTTP ", res.status));
    res.set_content(Dump(ErrorBody(status)), kJsonContentType);
  });
  server->port_ = options.port == 0
                      ? http.bind_to_any_port(options.host)
                      : (http.bind_to_port(options.host, options.port) ? options.port : -1);
  if (server->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", options.host, ":", options.port));
  }
  server->listener_ = std::thread([&http] { http.listen_after_bind(); });
  return server;
}

OpenAiServer::~OpenAiServer() { Stop(); }

void OpenAiServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (listener_.joinable()) listener_.join();
}

}  // namespace tessera::router::openai
