#include "common/metrics/metrics_server.h"

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "prometheus/text_serializer.h"

namespace tessera::metrics {
namespace {

// httplib's default also sets SO_REUSEPORT, which would let a second server bind a port that is
// in use (and steal half its connections). SO_REUSEADDR alone still allows a quick restart on a
// port left in TIME_WAIT.
void ReuseAddressOnly(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

absl::Status CheckOptions(const prometheus::Collectable* collectable,
                          const MetricsServerOptions& options) {
  if (collectable == nullptr) return absl::InvalidArgumentError("metrics server: no registry");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port must be in [0, 65535], got ", options.port));
  }
  if (options.num_threads < 1) {
    return absl::InvalidArgumentError("metrics server: num_threads must be >= 1");
  }
  return absl::OkStatus();
}

}  // namespace

std::string RenderMetrics(const prometheus::Collectable& collectable) {
  return prometheus::TextSerializer().Serialize(collectable.Collect());
}

// The httplib server, its routes and the thread that runs its accept loop.
class MetricsServer::Impl {
 public:
  Impl(std::shared_ptr<prometheus::Collectable> collectable, const MetricsServerOptions& options)
      : collectable_(std::move(collectable)), readiness_(options.readiness) {
    const size_t threads = static_cast<size_t>(options.num_threads);
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_.set_socket_options(ReuseAddressOnly);
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
      response.set_content(RenderMetrics(*collectable_), kExpositionContentType);
    });
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("ok\n", "text/plain");
    });
    server_.Get("/readyz", [this](const httplib::Request&, httplib::Response& response) {
      const absl::Status ready = readiness_ ? readiness_() : absl::OkStatus();
      if (ready.ok()) {
        response.set_content("ready\n", "text/plain");
        return;
      }
      response.status = 503;
      // One line, so probes and logs show the whole reason.
      response.set_content(
          absl::StrCat(absl::StrReplaceAll(ready.message(), {{"\n", " "}}), "\n"), "text/plain");
    });
  }

  // Returns the bound port, or -1.
  int Bind(const std::string& host, int port) {
    if (port == 0) return server_.bind_to_any_port(host);
    return server_.bind_to_port(host, port) ? port : -1;
  }

  // Runs the accept loop on its own thread; returns once it accepts (so Stop cannot race the
  // loop's start: httplib's stop() does nothing before the loop runs).
  void Run() {
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      loop_ended_ = true;
    });
    while (!server_.is_running() && !loop_ended_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void Stop() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }

 private:
  const std::shared_ptr<prometheus::Collectable> collectable_;
  const std::function<absl::Status()> readiness_;
  httplib::Server server_;
  std::atomic<bool> loop_ended_{false};
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    std::shared_ptr<prometheus::Collectable> collectable, MetricsServerOptions options) {
  if (absl::Status s = CheckOptions(collectable.get(), options); !s.ok()) return s;
  auto impl = std::make_unique<Impl>(std::move(collectable), options);
  const int port = impl->Bind(options.host, options.port);
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", options.host, ":", options.port));
  }
  impl->Run();
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(options), std::move(impl), port));
}

MetricsServer::MetricsServer(MetricsServerOptions options, std::unique_ptr<Impl> impl, int port)
    : options_(std::move(options)), impl_(std::move(impl)), port_(port) {}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Stop() { impl_->Stop(); }

}  // namespace tessera::metrics
