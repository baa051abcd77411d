// `tessera serve`: runs tessera-worker and tessera-router (found next to this executable) as one
// service and supervises them.
//
//   1. worker: `--model M --listen 127.0.0.1:0 [--threads N ...]`, until it prints
//      "tessera-worker listening on HOST:PORT";
//   2. router: `--model M --worker HOST:PORT --listen HOST:PORT [...]`, until it prints
//      "tessera-router listening on HOST:PORT";
//   3. polls the router's grpc.health.v1 Check("") until SERVING (the worker described itself),
//      then prints "tessera serve: router metrics on HOST:PORT" and "tessera serve: worker
//      metrics on HOST:PORT" (with --metrics-port / --worker-metrics-port; the children print
//      "<name> metrics on ..." before their listening line), "tessera serve: http on HOST:PORT"
//      (the router's OpenAI-compatible API, unless --http-port 0) and "tessera serve: listening
//      on HOST:PORT" to stdout;
//   Auth: a fresh random router⇄worker secret per run goes to both children in
//      $TESSERA_WORKER_SECRET, and --api-key to the router in $TESSERA_API_KEY (the environment,
//      not argv, which any local user can read); --tls-cert/--tls-key go to the router, and the
//      health poll then trusts that certificate.
//   4. SIGINT/SIGTERM: forwarded to the router first (it drains and exits), then the worker gets
//      SIGTERM; a second signal while draining kills the router at once. Exit 0 when both ended
//      cleanly. A router that dies on its own stops the worker and fails the command; a worker
//      that dies is restarted on its port with backoff (0.5 s doubling to 30 s) while the router
//      answers UNAVAILABLE and redials it, unless --no-restart (then it fails the command too).
// Children's output is echoed to stderr line by line, prefixed with their name.
//
// Threading: the main thread only. SIGINT/SIGTERM/SIGCHLD are blocked before any thread starts
// (so the child pumps and gRPC's threads inherit that) and taken with sigtimedwait here.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tools/cli/child_process.h"
#include "tools/cli/commands.h"
#include "tools/cli/worker_secret.h"

namespace tessera::cli {
namespace {

constexpr char kWorkerBinary[] = "tessera-worker";
constexpr char kRouterBinary[] = "tessera-router";
// How long the worker may take to exit after SIGTERM, and the router beyond its drain timeout.
constexpr absl::Duration kExitGrace = absl::Seconds(10);
constexpr double kRouterDefaultDrainS = 30;  // tessera-router's --drain-timeout-s default

sigset_t SupervisedSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int signo : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&signals, signo);
  return signals;
}

// A pending SIGINT/SIGTERM within `wait` (0 if none); a SIGCHLD only ends the wait early.
int TakeStopSignal(absl::Duration wait) {
  const sigset_t signals = SupervisedSignals();
  const timespec timeout = absl::ToTimespec(wait);
  const int signo = sigtimedwait(&signals, nullptr, &timeout);
  return signo == SIGINT || signo == SIGTERM ? signo : 0;
}

// The last non-empty line of a child's stderr, for one-line error messages (the whole output
// was echoed already).
std::string LastStderrLine(const ChildProcess& child) {
  std::vector<std::string> lines = absl::StrSplit(child.StderrTail(), '\n', absl::SkipWhitespace());
  return lines.empty() ? "" : absl::StrCat("; its last stderr line: \"", lines.back(), "\"");
}

// "tessera-worker exited before listening (exit status 1); its last stderr line: "..."".
std::string Died(const ChildProcess& child, const ChildExit& exit, std::string_view when) {
  return absl::StrCat(child.name(), " exited ", std::string(when), " (", exit.ToString(), ")",
                      LastStderrLine(child));
}

// What a child printed before its listening line ("" when it did not).
struct ChildAddresses {
  std::string metrics;
  std::string http;
};

std::vector<std::string> WorkerArgs(const ServeOptions& o);

class Supervisor {
 public:
  explicit Supervisor(const ServeOptions& options) : options_(options) {}

  absl::Status Run();

 private:
  absl::StatusOr<std::string> FindBinary(const std::string& name) const;
  absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::string& name,
                                                      std::vector<std::string> args,
                                                      std::vector<std::string> env);
  // Reads `child`'s stdout until "<name> listening on HOST:PORT"; returns HOST:PORT. The
  // "<name> metrics on HOST:PORT" and "<name> http on HOST:PORT" lines before it land in
  // *addresses.
  absl::StatusOr<std::string> AwaitListening(ChildProcess& child, ChildAddresses* addresses);
  absl::Status AwaitServing(const std::string& router_addr);
  // Fails when a started child has ended; CANCELLED when a stop signal arrived.
  absl::Status CheckChildren(absl::Duration wait);
  absl::Status Supervise();
  // Restarts the dead worker on its port, retrying with exponential backoff (0.5 s doubling to
  // 30 s); the router redials it by itself. CANCELLED when a stop signal arrives meanwhile.
  absl::Status RestartWorker();
  absl::Status Shutdown(int signo);
  // Signals `child`, waits up to `grace` (a further stop signal cuts it short), then SIGKILLs.
  ChildExit Stop(ChildProcess& child, int signo, absl::Duration grace);
  void StopAll();

  const ServeOptions& options_;
  std::unique_ptr<ChildProcess> worker_;
  std::unique_ptr<ChildProcess> router_;
  ChildAddresses worker_addresses_;
  ChildAddresses router_addresses_;
  int stop_signal_ = 0;
  ChildProcess* dead_ = nullptr;  // the child CheckChildren found ended
  std::string worker_addr_;       // HOST:PORT the router dials; a restarted worker reuses it
  std::string worker_secret_env_;  // TESSERA_WORKER_SECRET=..., the same for a restarted worker
  int num_restarts_ = 0;
};

absl::StatusOr<std::string> Supervisor::FindBinary(const std::string& name) const {
  std::filesystem::path dir = options_.bin_dir;
  if (dir.empty()) {
    std::error_code error;
    dir = std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
    if (error) return absl::InternalError("cannot read /proc/self/exe: " + error.message());
  }
  const std::filesystem::path path = dir / name;
  if (access(path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(name, " not found at ", path.string(),
                                            " (build it next to tessera, or pass --bin-dir)"));
  }
  return path.string();
}

absl::StatusOr<std::unique_ptr<ChildProcess>> Supervisor::Start(const std::string& name,
                                                                std::vector<std::string> args,
                                                                std::vector<std::string> env) {
  absl::StatusOr<std::string> path = FindBinary(name);
  if (!path.ok()) return path.status();
  ChildOptions child;
  child.path = *path;
  child.args = std::move(args);
  child.name = name;
  child.echo_stdout_fd = STDERR_FILENO;  // our stdout carries only our own "listening" line
  child.echo_stderr_fd = STDERR_FILENO;
  child.env = std::move(env);
  return ChildProcess::Spawn(std::move(child));
}

absl::StatusOr<std::string> Supervisor::AwaitListening(ChildProcess& child,
                                                       ChildAddresses* addresses) {
  const std::string prefix = absl::StrCat(child.name(), " listening on ");
  const absl::Time deadline = absl::Now() + absl::Seconds(options_.startup_timeout_s);
  for (;;) {
    absl::StatusOr<std::string> line = child.ReadStdoutLine(absl::Milliseconds(100));
    bool announced = false;
    for (auto [what, address] : {std::pair{" metrics on ", &addresses->metrics},
                                 std::pair{" http on ", &addresses->http}}) {
      const std::string announce = absl::StrCat(child.name(), what);
      if (line.ok() && absl::StartsWith(*line, announce)) {
        *address = std::string(absl::StripAsciiWhitespace(line->substr(announce.size())));
        announced = true;
      }
    }
    if (announced) continue;
    if (line.ok() && absl::StartsWith(*line, prefix)) {
      const std::string addr(absl::StripAsciiWhitespace(line->substr(prefix.size())));
      if (addr.find(':') == std::string::npos) {
        return absl::InternalError(absl::StrCat(child.name(), " printed a bad address: ", *line));
      }
      return addr;
    }
    if (line.status().code() == absl::StatusCode::kOutOfRange) {
      const std::optional<ChildExit> exit = child.Wait(kExitGrace);
      if (!exit.has_value()) {
        return absl::InternalError(absl::StrCat(child.name(), " closed its stdout unannounced"));
      }
      return absl::UnavailableError(Died(child, *exit, "before listening"));
    }
    if (int signo = TakeStopSignal(absl::ZeroDuration())) {
      stop_signal_ = signo;
      return absl::CancelledError(absl::StrCat("interrupted (", strsignal(signo), ")"));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(child.name(), " did not report \"", prefix,
                                                      "...\" within ", options_.startup_timeout_s,
                                                      " s (--startup-timeout-s)"));
    }
  }
}

absl::Status Supervisor::CheckChildren(absl::Duration wait) {
  if (int signo = TakeStopSignal(wait)) {
    stop_signal_ = signo;
    return absl::CancelledError(absl::StrCat("interrupted (", strsignal(signo), ")"));
  }
  for (ChildProcess* child : {worker_.get(), router_.get()}) {
    if (child == nullptr) continue;
    if (std::optional<ChildExit> exit = child->Poll()) {
      dead_ = child;
      return absl::UnavailableError(Died(*child, *exit, "unexpectedly"));
    }
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
    if (absl::Status alive = CheckChildren(absl::Milliseconds(100)); !alive.ok()) return alive;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          kRouterBinary, " at ", router_addr, " was not SERVING within ",
          options_.startup_timeout_s, " s (last health check: ", last, ")"));
    }
  }
}

ChildExit Supervisor::Stop(ChildProcess& child, int signo, absl::Duration grace) {
  (void)child.Signal(signo);
  const absl::Time deadline = absl::Now() + grace;
  while (absl::Now() < deadline) {
    if (std::optional<ChildExit> exit = child.Poll()) return *exit;
    if (TakeStopSignal(absl::Milliseconds(50)) != 0) {
      std::fprintf(stderr, "tessera serve: second signal; killing %s\n", child.name().c_str());
      break;
    }
  }
  (void)child.Signal(SIGKILL);
  return child.Wait(kExitGrace).value_or(ChildExit{});
}

void Supervisor::StopAll() {
  if (router_ != nullptr && !router_->Poll()) Stop(*router_, SIGTERM, kExitGrace);
  if (worker_ != nullptr && !worker_->Poll()) Stop(*worker_, SIGTERM, kExitGrace);
}

absl::Status Supervisor::Shutdown(int signo) {
  const double drain_s =
      options_.drain_timeout_s >= 0 ? options_.drain_timeout_s : kRouterDefaultDrainS;
  std::fprintf(stderr, "tessera serve: %s; draining %s (up to %.0f s)\n", strsignal(signo),
               kRouterBinary, drain_s);
  const ChildExit router_exit = Stop(*router_, signo, absl::Seconds(drain_s) + kExitGrace);
  const ChildExit worker_exit = Stop(*worker_, SIGTERM, kExitGrace);
  if (!router_exit.success()) {
    return absl::InternalError(Died(*router_, router_exit, "badly while draining"));
  }
  // A worker without a SIGTERM handler ends by the signal: that is a clean stop too.
  if (!worker_exit.success() && worker_exit.signal != SIGTERM) {
    return absl::InternalError(Died(*worker_, worker_exit, "badly while stopping"));
  }
  std::fprintf(stderr, "tessera serve: stopped\n");
  return absl::OkStatus();
}

absl::Status Supervisor::Supervise() {
  for (;;) {
    absl::Status alive = CheckChildren(absl::Milliseconds(200));
    if (alive.ok()) continue;
    if (stop_signal_ != 0) return Shutdown(stop_signal_);
    if (dead_ == worker_.get() && !options_.no_restart) {
      std::fprintf(stderr, "tessera serve: %s; restarting it\n", std::string(alive.message()).c_str());
      alive = RestartWorker();
      if (alive.ok()) continue;
      if (stop_signal_ != 0) return Shutdown(stop_signal_);
    }
    StopAll();
    return absl::Status(alive.code(), absl::StrCat(alive.message(), "; stopped the other"));
  }
}

absl::Status Supervisor::RestartWorker() {
  absl::Duration backoff = absl::Milliseconds(500);
  const std::string port = worker_addr_.substr(worker_addr_.rfind(':') + 1);
  for (;;) {
    if (int signo = TakeStopSignal(backoff)) {
      stop_signal_ = signo;
      return absl::CancelledError(absl::StrCat("interrupted (", strsignal(signo), ")"));
    }
    std::vector<std::string> args = WorkerArgs(options_);
    // The same port, so the router's redial finds it (WorkerArgs asks for any free port).
    auto listen = std::find(args.begin(), args.end(), "--listen");
    *(listen + 1) = absl::StrCat("127.0.0.1:", port);
    absl::StatusOr<std::unique_ptr<ChildProcess>> worker =
        Start(kWorkerBinary, std::move(args), {worker_secret_env_});
    absl::Status status = worker.status();
    if (worker.ok()) {
      worker_ = *std::move(worker);
      status = AwaitListening(*worker_, &worker_addresses_).status();
    }
    if (status.ok()) {
      ++num_restarts_;
      std::fprintf(stderr, "tessera serve: restarted %s on %s (restart %d)\n", kWorkerBinary,
                   worker_addr_.c_str(), num_restarts_);
      dead_ = nullptr;
      return absl::OkStatus();
    }
    if (stop_signal_ != 0) return status;
    backoff = std::min(backoff * 2, absl::Seconds(30));
    std::fprintf(stderr, "tessera serve: restarting %s failed (%s); next try in %s\n",
                 kWorkerBinary, std::string(status.message()).c_str(),
                 absl::FormatDuration(backoff).c_str());
  }
}

// Appends `flag value` when `value` is set (`value > unset`).
template <typename T>
void AddIfSet(std::vector<std::string>& args, const char* flag, T value, T unset) {
  if (value > unset) args.insert(args.end(), {flag, absl::StrCat(value)});
}

void AddIfSet(std::vector<std::string>& args, const char* flag, const std::string& value) {
  if (!value.empty()) args.insert(args.end(), {flag, value});
}

std::vector<std::string> WorkerArgs(const ServeOptions& o) {
  std::vector<std::string> args = {"--model", o.model_path, "--listen", "127.0.0.1:0"};
  AddIfSet(args, "--threads", o.threads, 0);
  AddIfSet(args, "--max-num-seqs", o.max_num_seqs, 0);
  AddIfSet(args, "--kv-cache-mb", o.kv_cache_mb, 0);
  AddIfSet(args, "--state-snapshot-mb", o.state_snapshot_mb, int64_t{-1});
  AddIfSet(args, "--num-kv-blocks", o.num_kv_blocks, int64_t{0});
  AddIfSet(args, "--block-size", o.block_size, 0);
  AddIfSet(args, "--activations", o.activations);
  AddIfSet(args, "--kv-cache-dtype", o.kv_cache_dtype);
  AddIfSet(args, "--device", o.device);
  AddIfSet(args, "--dtype", o.dtype);
  AddIfSet(args, "--gpu-memory-utilization", o.gpu_memory_utilization, 0.0);
  AddIfSet(args, "--cuda-graphs", o.cuda_graphs);
  // The worker sizes its step buffers from it (cuda); the router plans within what it reports.
  AddIfSet(args, "--max-num-batched-tokens", o.max_num_batched_tokens, 0);
  if (o.batch_invariant) args.push_back("--batch-invariant");
  if (o.dequantize_weights) args.push_back("--dequantize-weights");
  if (o.mmap_weights) args.push_back("--mmap-weights");
  if (o.worker_metrics_port >= 0) {
    args.insert(args.end(), {"--metrics-host", o.metrics_host, "--metrics-port",
                             absl::StrCat(o.worker_metrics_port)});
  }
  args.insert(args.end(), o.worker_args.begin(), o.worker_args.end());
  return args;
}

std::vector<std::string> RouterArgs(const ServeOptions& o, const std::string& worker_addr) {
  // An IPv6 literal needs brackets before the port.
  const bool bracket = o.host.find(':') != std::string::npos && o.host.front() != '[';
  const std::string host = bracket ? absl::StrCat("[", o.host, "]") : o.host;
  std::vector<std::string> args = {"--model", o.model_path, "--worker", worker_addr, "--listen",
                                   absl::StrCat(host, ":", o.port)};
  AddIfSet(args, "--max-num-seqs", o.max_num_seqs, 0);
  AddIfSet(args, "--max-num-batched-tokens", o.max_num_batched_tokens, 0);
  AddIfSet(args, "--max-waiting", o.max_waiting, 0);
  if (o.drain_timeout_s >= 0) {
    args.insert(args.end(), {"--drain-timeout-s", absl::StrCat(o.drain_timeout_s)});
  }
  if (o.no_prefix_cache) args.push_back("--no-prefix-cache");
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
  args.insert(args.end(), o.router_args.begin(), o.router_args.end());
  return args;
}

absl::Status Supervisor::Run() {
  worker_secret_env_ = WorkerSecretEnvEntry(RandomSecret());
  const std::string& secret = worker_secret_env_;
  std::vector<std::string> router_env = {secret};
  if (!options_.api_key.empty()) {
    router_env.push_back(absl::StrCat("TESSERA_API_KEY=", options_.api_key));
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> worker =
      Start(kWorkerBinary, WorkerArgs(options_), {secret});
  if (!worker.ok()) return worker.status();
  worker_ = *std::move(worker);
  absl::StatusOr<std::string> worker_addr = AwaitListening(*worker_, &worker_addresses_);
  absl::StatusOr<std::string> router_addr;
  absl::Status ready = worker_addr.status();
  if (ready.ok()) worker_addr_ = *worker_addr;
  if (ready.ok()) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> router =
        Start(kRouterBinary, RouterArgs(options_, *worker_addr), router_env);
    ready = router.status();
    if (router.ok()) router_ = *std::move(router);
  }
  if (ready.ok()) {
    router_addr = AwaitListening(*router_, &router_addresses_);
    ready = router_addr.status();
  }
  if (ready.ok()) ready = AwaitServing(*router_addr);
  if (!ready.ok()) {
    StopAll();
    return ready;
  }
  for (auto [what, address] : {std::pair{"router metrics", &router_addresses_.metrics},
                               std::pair{"worker metrics", &worker_addresses_.metrics},
                               std::pair{"http", &router_addresses_.http}}) {
    if (!address->empty()) std::printf("tessera serve: %s on %s\n", what, address->c_str());
  }
  std::printf("tessera serve: listening on %s\n", router_addr->c_str());
  std::fflush(stdout);
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
  // Before any thread starts: every thread inherits the mask, so only sigtimedwait sees these.
  const sigset_t signals = SupervisedSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Supervisor supervisor(options);
  return supervisor.Run();
}

}  // namespace tessera::cli
