// `tessera serve`: runs tessera-worker(s) and tessera-router (found next to this executable) as
// one service and supervises them.
//
//   1. workers (serve_workers.h; --workers N, default 1): `--model M --listen 127.0.0.1:0
//      [--threads N ...]`, each until it prints "tessera-worker listening on HOST:PORT";
//   2. router: `--model M --worker HOST:PORT... --listen HOST:PORT [...]` (one --worker per
//      worker, and one --worker-metrics per worker whenever the router serves /metrics: the
//      workers then serve theirs on loopback and the router re-serves them labelled worker="i"),
//      until it prints "tessera-router listening on HOST:PORT";
//   3. polls the router's grpc.health.v1 Check("") until SERVING (a worker described itself),
//      then prints "tessera serve: router metrics on HOST:PORT" and, per worker, "tessera serve:
//      worker metrics on HOST:PORT" (with --metrics-port / --worker-metrics-port; the children
//      print "<name> metrics on ..." before their listening line), "tessera serve: http on
//      HOST:PORT" (the router's OpenAI-compatible API, unless --http-port 0) and "tessera serve:
//      listening on HOST:PORT" to stdout;
//   Auth: a fresh random router⇄worker secret per run goes to every child in
//      $TESSERA_WORKER_SECRET, and --api-key to the router in $TESSERA_API_KEY (the environment,
//      not argv, which any local user can read); --tls-cert/--tls-key go to the router, and the
//      health poll then trusts that certificate.
//   4. SIGINT/SIGTERM: forwarded to the router first (it drains and exits), then the workers get
//      SIGTERM; a second signal while draining kills the router at once. Exit 0 when all ended
//      cleanly. A router that dies on its own stops the workers and fails the command; a worker
//      that dies is restarted on its port with backoff (0.5 s doubling to 30 s) while the router
//      answers UNAVAILABLE for it (the other workers keep serving) and redials it, unless
//      --no-restart (then it fails the command too).
// Children's output is echoed to stderr line by line, prefixed with their name.
//
// Threading: the main thread only. SIGINT/SIGTERM/SIGCHLD are blocked before any thread starts
// (so the child pumps and gRPC's threads inherit that) and taken with sigtimedwait here.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/process/child_process.h"
#include "common/process/worker_secret.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tools/cli/commands.h"
#include "tools/cli/serve_children.h"
#include "tools/cli/serve_workers.h"

namespace tessera::cli {
namespace {

constexpr double kRouterDefaultDrainS = 30;  // tessera-router's --drain-timeout-s default

class Supervisor {
 public:
  Supervisor(const ServeOptions& options, std::vector<std::vector<int>> cuda_devices)
      : options_(options),
        launcher_(options),
        secret_env_(process::WorkerSecretEnvEntry(process::RandomSecret())),
        workers_(options, launcher_, std::move(cuda_devices), secret_env_) {}

  absl::Status Run();

 private:
  // Starts the router on the workers' addresses and waits until it is SERVING; its address.
  absl::StatusOr<std::string> StartRouter();
  absl::Status AwaitServing(const std::string& router_addr);
  // Fails when the router has ended; CANCELLED when a stop signal arrived.
  absl::Status CheckRouter(absl::Duration wait);
  absl::Status Supervise();
  absl::Status Shutdown(int signo);
  void StopAll();
  void PrintAddresses(const std::string& router_addr) const;

  const ServeOptions& options_;
  const ChildLauncher launcher_;
  const std::string secret_env_;  // TESSERA_WORKER_SECRET=..., the same for every worker
  ServeWorkers workers_;
  std::unique_ptr<process::ChildProcess> router_;
  ChildAddresses router_addresses_;
  int stop_signal_ = 0;
};

absl::Status Supervisor::CheckRouter(absl::Duration wait) {
  if (int signo = TakeStopSignal(wait)) {
    stop_signal_ = signo;
    return Interrupted(signo);
  }
  if (router_ == nullptr) return absl::OkStatus();
  if (std::optional<process::ChildExit> exit = router_->Poll()) {
    return absl::UnavailableError(Died(*router_, *exit, "unexpectedly"));
  }
  return absl::OkStatus();
}

absl::Status Supervisor::AwaitServing(const std::string& router_addr) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options_.tls_cert.empty()) {
    std::ifstream in(options_.tls_cert, std::ios::binary);
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    credentials = grpc::SslCredentials(ssl);
  }
  auto stub =
      grpc::health::v1::Health::NewStub(grpc::CreateChannel(router_addr, credentials));
  const absl::Time deadline = absl::Now() + absl::Seconds(options_.startup_timeout_s);
  std::string last = "no answer yet";
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    grpc::health::v1::HealthCheckRequest request;  // service "": the server as a whole
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, request, &response);
    if (status.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    last = status.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())
                       : status.error_message();
    if (absl::Status alive = CheckRouter(absl::Milliseconds(100)); !alive.ok()) return alive;
    if (absl::Status alive = workers_.Tend(&stop_signal_); !alive.ok()) return alive;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          kRouterBinary, " at ", router_addr, " was not SERVING within ",
          options_.startup_timeout_s, " s (last health check: ", last, ")"));
    }
  }
}

void Supervisor::StopAll() {
  if (router_ != nullptr && !router_->Poll()) StopChild(*router_, SIGTERM, kExitGrace);
  (void)workers_.StopAll();
}

absl::Status Supervisor::Shutdown(int signo) {
  const double drain_s =
      options_.drain_timeout_s >= 0 ? options_.drain_timeout_s : kRouterDefaultDrainS;
  std::fprintf(stderr, "tessera serve: %s; draining %s (up to %.0f s)\n", strsignal(signo),
               kRouterBinary, drain_s);
  const process::ChildExit router_exit =
      StopChild(*router_, signo, absl::Seconds(drain_s) + kExitGrace);
  const absl::Status workers_exit = workers_.StopAll();
  if (!router_exit.success()) {
    return absl::InternalError(Died(*router_, router_exit, "badly while draining"));
  }
  if (!workers_exit.ok()) return workers_exit;
  std::fprintf(stderr, "tessera serve: stopped\n");
  return absl::OkStatus();
}

absl::Status Supervisor::Supervise() {
  for (;;) {
    absl::Status alive = CheckRouter(absl::Milliseconds(200));
    if (alive.ok()) alive = workers_.Tend(&stop_signal_);
    if (alive.ok()) continue;
    if (stop_signal_ != 0) return Shutdown(stop_signal_);
    StopAll();
    return absl::Status(alive.code(), absl::StrCat(alive.message(), "; stopped the others"));
  }
}

std::vector<std::string> RouterArgs(const ServeOptions& o,
                                    const std::vector<std::string>& worker_addrs,
                                    const std::vector<std::string>& worker_metrics) {
  // An IPv6 literal needs brackets before the port.
  const bool bracket = o.host.find(':') != std::string::npos && o.host.front() != '[';
  const std::string host = bracket ? absl::StrCat("[", o.host, "]") : o.host;
  std::vector<std::string> args = {"--model", o.model_path};
  for (const std::string& addr : worker_addrs) args.insert(args.end(), {"--worker", addr});
  if (worker_metrics.size() == worker_addrs.size()) {  // the router re-serves their series
    for (const std::string& addr : worker_metrics) {
      args.insert(args.end(), {"--worker-metrics", addr});
    }
  }
  args.insert(args.end(), {"--listen", absl::StrCat(host, ":", o.port)});
  AddIfSet(args, "--max-num-seqs", o.max_num_seqs, 0);
  AddIfSet(args, "--max-num-batched-tokens", o.max_num_batched_tokens, 0);
  AddIfSet(args, "--max-waiting", o.max_waiting, 0);
  if (o.drain_timeout_s >= 0) {
    args.insert(args.end(), {"--drain-timeout-s", absl::StrCat(o.drain_timeout_s)});
  }
  if (o.no_prefix_cache) args.push_back("--no-prefix-cache");
  if (o.no_web_console) args.push_back("--no-web-console");
  AddIfSet(args, "--max-queue-time", o.max_queue_time_s, -1.0);
  AddIfSet(args, "--stream-stall-timeout", o.stream_stall_timeout_s, -1.0);
  AddIfSet(args, "--kv-reserve-horizon", o.kv_reserve_horizon, -1);
  AddIfSet(args, "--preemption-storm-threshold", o.preemption_storm_threshold, -1);
  AddIfSet(args, "--preemption-storm-window-s", o.preemption_storm_window_s, -1.0);
  AddIfSet(args, "--log-level", o.log_level);
  args.insert(args.end(), {"--http-port", absl::StrCat(o.http_port)});
  AddIfSet(args, "--trace-steps", o.trace_steps_path);
  if (o.metrics_port >= 0) {
    args.insert(args.end(), {"--metrics-host", o.metrics_host, "--metrics-port",
                             absl::StrCat(o.metrics_port)});
  }
  AddIfSet(args, "--tls-cert", o.tls_cert);
  AddIfSet(args, "--tls-key", o.tls_key);
  AddIfSet(args, "--chat-template", o.chat_template);
  for (const std::string& name : o.served_model_names) {
    args.insert(args.end(), {"--served-model-name", name});
  }
  args.insert(args.end(), o.router_args.begin(), o.router_args.end());
  return args;
}

absl::StatusOr<std::string> Supervisor::StartRouter() {
  std::vector<std::string> env = {secret_env_};
  if (!options_.api_key.empty()) env.push_back(absl::StrCat("TESSERA_API_KEY=", options_.api_key));
  absl::StatusOr<std::unique_ptr<process::ChildProcess>> router = launcher_.Start(
      kRouterBinary, kRouterBinary, RouterArgs(options_, workers_.addresses(), workers_.metrics_addresses()),
      std::move(env));
  if (!router.ok()) return router.status();
  router_ = *std::move(router);
  absl::StatusOr<std::string> router_addr =
      launcher_.AwaitListening(*router_, kRouterBinary, &router_addresses_, &stop_signal_);
  if (!router_addr.ok()) return router_addr.status();
  if (absl::Status serving = AwaitServing(*router_addr); !serving.ok()) return serving;
  return router_addr;
}

void Supervisor::PrintAddresses(const std::string& router_addr) const {
  if (!router_addresses_.metrics.empty()) {
    std::printf("tessera serve: router metrics on %s\n", router_addresses_.metrics.c_str());
  }
  if (options_.worker_metrics_port >= 0) {
    for (const std::string& metrics : workers_.metrics_addresses()) {
      std::printf("tessera serve: worker metrics on %s\n", metrics.c_str());
    }
  }
  if (!router_addresses_.http.empty()) {
    std::printf("tessera serve: http on %s\n", router_addresses_.http.c_str());
    if (!options_.no_web_console) {
      std::printf("tessera serve: web console on %s://%s/\n",
                  options_.tls_cert.empty() ? "http" : "https", router_addresses_.http.c_str());
    }
  }
  std::printf("tessera serve: listening on %s\n", router_addr.c_str());
  std::fflush(stdout);
}

absl::Status Supervisor::Run() {
  absl::Status ready = workers_.StartAll(&stop_signal_);
  absl::StatusOr<std::string> router_addr;
  if (ready.ok()) router_addr = StartRouter();
  if (ready.ok()) ready = router_addr.status();
  if (!ready.ok()) {
    StopAll();
    return ready;
  }
  PrintAddresses(*router_addr);
  return Supervise();
}

}  // namespace

absl::Status RunServe(const ServeOptions& options) {
  if (options.host.empty()) return absl::InvalidArgumentError("--host is empty");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--port ", options.port, " is not in [0, 65535]"));
  }
  for (const auto& [flag, port] : {std::pair{"--metrics-port", options.metrics_port},
                                   std::pair{"--worker-metrics-port", options.worker_metrics_port},
                                   std::pair{"--http-port", options.http_port}}) {
    if (port < -1 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", port, " is not in [0, 65535]"));
    }
  }
  if (options.workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--workers ", options.workers, " is not >= 1"));
  }
  if (options.worker_metrics_port > 0 && options.worker_metrics_port + options.workers > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker-metrics-port ", options.worker_metrics_port, " + --workers ", options.workers,
        " passes port 65535 (worker i listens on P + i)"));
  }
  // Before any thread starts (the CUDA device query may start some): every thread inherits the
  // mask, so only sigtimedwait sees these.
  const sigset_t signals = SupervisedSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::StatusOr<std::vector<std::vector<int>>> cuda_devices = WorkerCudaDevices(options);
  if (!cuda_devices.ok()) return cuda_devices.status();
  Supervisor supervisor(options, *std::move(cuda_devices));
  return supervisor.Run();
}

}  // namespace tessera::cli
