// tessera-router: serves the public tessera.v1 API (plus grpc.health.v1 and reflection) and drives
// one worker over the step protocol, or several (--worker repeated: data parallel, one engine per
// worker behind router/engine_group.h, metrics labelled worker="i"). Prints "tessera-router
// listening on HOST:PORT" once the server accepts connections; the health status turns SERVING
// when a worker has described itself. SIGINT/SIGTERM drain: stop admitting, let requests finish
// within --drain-timeout-s, cancel the rest, exit 0.
//
// With --metrics-port it also serves Prometheus /metrics, /healthz and /readyz (ready = a worker
// is connected and the router is not draining, the same condition as the gRPC health status) and
// prints "tessera-router metrics on HOST:PORT" before the listening line. With --worker-metrics
// (one per --worker; `tessera serve` passes them) both /metrics also carry the workers' series,
// labelled worker="I" (router/worker_metrics_federation.h).
//
// With --http-port (default 8080; 0 = off) it serves the OpenAI-compatible HTTP API
// (router/openai/) on the --listen host and prints "tessera-router http on HOST:PORT" before the
// listening line too; GET / there is the web console (router/console/; off with
// --no-web-console).
//
// Auth and TLS: --api-key (or $TESSERA_API_KEY, read here) is required as
// `authorization: Bearer <key>` on the public gRPC API and the HTTP API (health, reflection and
// metrics stay open); --worker-secret (or $TESSERA_WORKER_SECRET) is presented to the worker;
// --tls-cert/--tls-key (PEM) serve gRPC and HTTP over TLS.
#include <csignal>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "common/metrics/collectable_union.h"
#include "common/metrics/metrics_server.h"
#include "prometheus/counter.h"
#include "router/console/step_feed.h"
#include "router/engine.h"
#include "router/engine_group.h"
#include "router/model_frontend.h"
#include "router/protobuf_log_limit.h"
#include "router/request_builder.h"
#include "router/openai/openai_server.h"
#include "router/gateway_metrics.h"
#include "router/router_metrics.h"
#include "router/tessera_service.h"
#include "router/worker_metrics_federation.h"

namespace {

using tessera::router::Engine;
using tessera::router::RequestEngine;
using tessera::router::EngineConfig;

struct RouterFlags {
  std::string model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string chat_template_path;  // --chat-template: replaces the model's own
  std::vector<std::string> served_model_names;  // --served-model-name (repeatable)
  std::string listen = "127.0.0.1:8000";
  double drain_timeout_s = 30;
  double stream_stall_timeout_s = 60;
  double max_queue_time_s = 0;
  double preemption_storm_window_s = 10;
  std::string log_level = "info";
  std::string metrics_host = "127.0.0.1";
  int metrics_port = -1;  // -1 = no metrics server; 0 = any free port
  std::string trace_steps_path;  // "" = no step trace
  bool web_console = true;       // the console on the HTTP port (with --http-port)
  int http_port = 8080;          // OpenAI-compatible HTTP; 0 = off
  std::string http_host;         // "" = the host of --listen
  int http_threads = 128;        // HTTP handler threads (concurrent HTTP requests)
  // Against slow and hostile HTTP clients (common/http/http_server.h).
  double http_header_timeout_s = 10;
  double http_body_timeout_s = 60;
  double http_keep_alive_timeout_s = 30;
  int http_max_body_mb = 32;
  int http_max_pending_body_mb = 256;
  int http_max_connections = 2048;
  int http_max_connections_per_client = 512;
  std::string api_key;           // "" = no key required
  std::string tls_cert;          // PEM paths; both set = TLS on gRPC and HTTP
  std::string tls_key;
  std::vector<std::string> workers;  // --worker, repeated: one engine each (data parallel)
  std::vector<std::string> worker_metrics;  // --worker-metrics: worker I's /metrics at index I
  std::string routing = "prefix";    // --routing: prefix (the rule) or round-robin (comparisons)
  EngineConfig engine;               // every engine's settings but its worker address
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "tessera-router: error: %s\n", message.c_str());
  return 1;
}

// Waits for SIGINT/SIGTERM (blocked in every thread), keeping the health status in step with
// the engine meanwhile.
void ServeUntilSignal(grpc::Server& server, const RequestEngine& engine, const sigset_t& signals) {
  grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService();
  const timespec tick{0, 100 * 1000 * 1000};
  bool serving = false;
  health->SetServingStatus(false);
  for (;;) {
    if (engine.serving() != serving) {
      serving = engine.serving();
      health->SetServingStatus(serving);
    }
    if (sigtimedwait(&signals, nullptr, &tick) > 0) return;
  }
}

// /readyz: the engine's serving() condition, with the reason when it is false.
absl::Status Readiness(const RequestEngine& engine) {
  if (engine.serving()) return absl::OkStatus();
  if (!engine.stats().worker_connected) return absl::UnavailableError("no worker is connected");
  return absl::UnavailableError("the router is draining");
}

// With --metrics-port: serves /metrics, /healthz and /readyz and prints "tessera-router metrics
// on HOST:PORT" (before the listening line, so a supervisor reading up to that line sees both).
absl::StatusOr<std::unique_ptr<tessera::metrics::MetricsServer>> StartMetricsServer(
    const RouterFlags& flags, std::shared_ptr<prometheus::Collectable> registry,
    const RequestEngine& engine) {
  if (flags.metrics_port < 0) return nullptr;
  absl::StatusOr<std::unique_ptr<tessera::metrics::MetricsServer>> server =
      tessera::metrics::MetricsServer::Start(
          std::move(registry), {.host = flags.metrics_host,
                               .port = flags.metrics_port,
                               .readiness = [&engine] { return Readiness(engine); }});
  if (server.ok()) {
    std::printf("tessera-router metrics on %s:%d\n", flags.metrics_host.c_str(),
                (*server)->port());
  }
  return server;
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// TLS with --tls-cert/--tls-key, else plaintext.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const RouterFlags& flags) {
  if (flags.tls_cert.empty()) return grpc::InsecureServerCredentials();
  std::optional<std::string> cert = ReadFile(flags.tls_cert);
  std::optional<std::string> key = ReadFile(flags.tls_key);
  if (!cert.has_value() || !key.has_value()) {
    return absl::InvalidArgumentError("cannot read --tls-cert or --tls-key");
  }
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

tessera::http::ServerLimits HttpLimitsOf(const RouterFlags& flags) {
  tessera::http::ServerLimits limits;
  limits.header_timeout = Millis(flags.http_header_timeout_s);
  limits.body_timeout = Millis(flags.http_body_timeout_s);
  limits.keep_alive_timeout = Millis(flags.http_keep_alive_timeout_s);
  limits.write_timeout = Millis(flags.stream_stall_timeout_s);
  limits.max_body_bytes = static_cast<size_t>(flags.http_max_body_mb) << 20;
  limits.max_pending_body_bytes = static_cast<size_t>(flags.http_max_pending_body_mb) << 20;
  limits.max_connections = flags.http_max_connections;
  limits.max_connections_per_client = flags.http_max_connections_per_client;
  return limits;
}

void AddHttpLimitOptions(CLI::App& app, RouterFlags& flags) {
  app.add_option("--http-header-timeout", flags.http_header_timeout_s,
                 "seconds a connection may take to send a request's line and headers, in all")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--http-body-timeout", flags.http_body_timeout_s,
                 "seconds a client may take to send a request body, in all")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--http-keep-alive-timeout", flags.http_keep_alive_timeout_s,
                 "seconds an idle kept-alive connection may take to send its next request")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--http-max-body-mb", flags.http_max_body_mb,
                 "largest request body in MiB (larger: 413 before the body is read)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--http-max-pending-body-mb", flags.http_max_pending_body_mb,
                 "MiB of request bodies all HTTP connections may hold at once (more: 503)")
      ->capture_default_str()->check(CLI::Range(1, 65536));
  app.add_option("--http-max-connections", flags.http_max_connections,
                 "open HTTP connections in all (more: 503 and closed)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--http-max-connections-per-client", flags.http_max_connections_per_client,
                 "open HTTP connections per client address (more: 503 and closed)")
      ->capture_default_str()->check(CLI::PositiveNumber);
}

// With --http-port: the OpenAI-compatible HTTP API, with /metrics as on the metrics port (the
// port an inference gateway's endpoint picker scrapes); prints "tessera-router http on HOST:PORT".
absl::StatusOr<std::unique_ptr<tessera::router::openai::OpenAiServer>> StartHttpServer(
    const RouterFlags& flags, RequestEngine* engine, const tessera::router::ModelFrontend* model,
    std::shared_ptr<prometheus::Collectable> registry,
    tessera::router::console::StepFeed* console_feed) {
  if (flags.http_port == 0) return nullptr;
  std::string host = flags.http_host;
  if (host.empty()) host = flags.listen.substr(0, flags.listen.rfind(':'));
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // the resolver takes a bare IPv6 literal
  }
  absl::StatusOr<std::unique_ptr<tessera::router::openai::OpenAiServer>> server =
      tessera::router::openai::OpenAiServer::Start(
          {.host = host,
           .port = std::max(flags.http_port, 0),
           .threads = flags.http_threads,
           .api_key = flags.api_key,
           .tls_cert = flags.tls_cert,
           .tls_key = flags.tls_key,
           .limits = HttpLimitsOf(flags),
           .metrics = std::move(registry),
           .console_feed = console_feed},
          engine, model);
  if (server.ok()) {
    const bool bracket = host.find(':') != std::string::npos;
    std::printf("tessera-router http on %s%s%s:%d\n", bracket ? "[" : "", host.c_str(),
                bracket ? "]" : "", (*server)->port());
  }
  return server;
}

// One step recorder per engine (each engine thread records its own steps), when there is a
// step trace or a console feed; none otherwise. --trace-steps PATH: PATH with one --worker,
// PATH.worker-I for worker I of several.
absl::StatusOr<std::vector<std::unique_ptr<tessera::router::StepRecorder>>> MakeStepRecorders(
    const RouterFlags& flags, tessera::router::console::StepFeed* console_feed) {
  using tessera::router::StepRecorder;
  std::vector<std::unique_ptr<StepRecorder>> recorders;
  if (flags.trace_steps_path.empty() && console_feed == nullptr) return recorders;
  for (size_t i = 0; i < flags.workers.size(); ++i) {
    std::unique_ptr<StepRecorder> recorder;
    if (flags.trace_steps_path.empty()) {
      recorder = StepRecorder::WithoutFile();
    } else {
      const std::string path = flags.workers.size() == 1
                                   ? flags.trace_steps_path
                                   : absl::StrCat(flags.trace_steps_path, ".worker-", i);
      absl::StatusOr<std::unique_ptr<StepRecorder>> opened = StepRecorder::Open(path);
      if (!opened.ok()) return opened.status();
      recorder = *std::move(opened);
    }
    if (console_feed != nullptr) recorder->AttachFeed(console_feed, static_cast<int>(i));
    recorders.push_back(std::move(recorder));
  }
  return recorders;
}

// The web console's feed when the console is served (an HTTP port, not --no-web-console), its
// lost records counted in `registry`.
std::unique_ptr<tessera::router::console::StepFeed> MakeConsoleFeed(
    const RouterFlags& flags, prometheus::Registry& registry) {
  if (flags.http_port == 0 || !flags.web_console) return nullptr;
  prometheus::Counter& dropped =
      prometheus::BuildCounter()
          .Name("tessera_console_records_dropped_total")
          .Help("Step records a web console viewer lost because it read slower than steps came")
          .Register(registry)
          .Add({});
  return std::make_unique<tessera::router::console::StepFeed>(
      tessera::router::console::StepFeedOptions{}, &dropped);
}

// One engine per --worker, each with its own metrics in `registry` (labelled worker="i" when
// there are several) adding to the pod-level `gateway` gauges, and step recorder (`recorders`:
// one per worker, or none); several engines are served as one EngineGroup.
std::unique_ptr<RequestEngine> MakeEngines(
    const RouterFlags& flags, const tessera::router::ModelFrontend* model,
    const std::shared_ptr<prometheus::Registry>& registry,
    tessera::router::GatewayMetrics* gateway,
    const std::vector<std::unique_ptr<tessera::router::StepRecorder>>& recorders,
    std::vector<std::unique_ptr<tessera::router::RouterMetrics>>* metrics) {
  const bool labelled = flags.workers.size() > 1;
  std::vector<std::unique_ptr<Engine>> engines;
  for (size_t i = 0; i < flags.workers.size(); ++i) {
    metrics->push_back(std::make_unique<tessera::router::RouterMetrics>(
        registry, tessera::router::RouterMetricsOptions{
                      .max_num_batched_tokens = flags.engine.max_num_batched_tokens,
                      .worker = labelled ? std::to_string(i) : "",
                      .gateway = gateway,
                      .gateway_engine = i}));
    EngineConfig config = flags.engine;
    config.worker_address = flags.workers[i];
    config.publish_prefixes = labelled;  // read by the group's routing only
    config.step_recorder = recorders.empty() ? nullptr : recorders[i].get();
    engines.push_back(std::make_unique<Engine>(config, model, metrics->back().get()));
  }
  if (!labelled) return std::move(engines.front());
  return std::make_unique<tessera::router::EngineGroup>(
      std::move(engines), flags.routing == "round-robin"
                              ? tessera::router::EngineGroup::Routing::kRoundRobin
                              : tessera::router::EngineGroup::Routing::kPrefixAndLoad);
}

// What /metrics serves: the router's registry, and with --worker-metrics the workers' series
// too, labelled worker="I" (one scrape target for `tessera serve`).
std::shared_ptr<prometheus::Collectable> ServedMetrics(
    const RouterFlags& flags, std::shared_ptr<prometheus::Registry> registry) {
  if (flags.worker_metrics.empty()) return registry;
  return std::make_shared<tessera::metrics::CollectableUnion>(
      std::vector<std::shared_ptr<prometheus::Collectable>>{
          std::move(registry), tessera::router::WorkerMetricsFederation::Start(
                                   {.addresses = flags.worker_metrics})});
}

void Drain(grpc::Server& server, RequestEngine& engine,
           const std::unique_ptr<tessera::router::openai::OpenAiServer>& http, double timeout_s) {
  server.GetHealthCheckService()->SetServingStatus(false);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  engine.BeginDrain(deadline);
  while (!engine.Drained()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // Give the last responses a moment to flush before the server cancels open calls.
  server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (http != nullptr) http->Stop();
  engine.Stop();
}

}  // namespace

int main(int argc, char** argv) {
  RouterFlags flags;
  CLI::App app{"tessera-router: the public API, scheduler and streaming front of tessera"};
  app.add_option("--model", flags.model_path,
                 "GGUF model or HF safetensors directory (tokenizer and chat template)")
      ->capture_default_str();
  app.add_option("--served-model-name", flags.served_model_names,
                 "the model's name in the API (repeatable: the first is reported, every one is "
                 "accepted); default: the model file's name without .gguf, and general.name is "
                 "accepted too");
  app.add_option("--chat-template", flags.chat_template_path,
                 "a Jinja chat template file to use instead of the model's own")
      ->check(CLI::ExistingFile);
  app.add_option("--worker", flags.workers,
                 "worker address HOST:PORT; repeat it to serve several workers (data parallel: "
                 "each request goes to the worker caching most of its prompt, unless it is "
                 "loaded well beyond the others, else to the least loaded)")
      ->required();
  app.add_option("--worker-metrics", flags.worker_metrics,
                 "worker I's metrics HOST:PORT, once per --worker in the same order: its series "
                 "are served on this router's /metrics labelled worker=\"I\" (tessera serve "
                 "passes these)");
  // Hidden: for benchmarks comparing the routing rule with round robin (docs/perf/scale-out.md).
  app.add_option("--routing", flags.routing,
                 "with several --worker: prefix (the rule above) or round-robin (comparisons)")
      ->check(CLI::IsMember({"prefix", "round-robin"}))
      ->group("");
  app.add_option("--listen", flags.listen, "HOST:PORT to serve on (port 0 = any free port)")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", flags.engine.max_num_batched_tokens,
                 "token budget per step")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-num-seqs", flags.engine.max_num_seqs, "sequences per step")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--stream-stall-timeout", flags.stream_stall_timeout_s,
                 "seconds a client may read nothing while its output is backlogged before its "
                 "request is cancelled (DEADLINE_EXCEEDED)")
      ->check(CLI::PositiveNumber);
  app.add_option("--log-level", flags.log_level,
                 "operational log level on stderr: debug, info, warn, error, off");
  app.add_option("--max-queue-time", flags.max_queue_time_s,
                 "seconds a request may wait unscheduled before it fails with "
                 "RESOURCE_EXHAUSTED (0 = no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-waiting", flags.engine.max_waiting, "waiting-queue capacity")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--preemption-storm-threshold", flags.engine.preemption_storm_threshold,
                 "log a preemption_storm warning at this many preemptions in one window")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--preemption-storm-window-s", flags.preemption_storm_window_s,
                 "the preemption_storm window in seconds")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--kv-reserve-horizon", flags.engine.reserve_horizon_tokens,
                 "tokens of KV growth admission reserves for the new request and every running "
                 "one (0 = admit on the first chunk's blocks, strictly FCFS)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  bool no_prefix_cache = false;
  app.add_flag("--no-prefix-cache", no_prefix_cache,
               "do not share KV blocks between requests with a common prefix");
  app.add_option("--drain-timeout-s", flags.drain_timeout_s,
                 "on SIGTERM, how long running requests may take to finish")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--metrics-port", flags.metrics_port,
                 "serve Prometheus /metrics, /healthz and /readyz on this port (0 = any free "
                 "port; default: no metrics server)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--metrics-host", flags.metrics_host, "address for the metrics server")
      ->capture_default_str();
  app.add_option("--trace-steps", flags.trace_steps_path,
                 "write one JSON line per step (batch composition and timings) to this file; "
                 "with several --worker, worker I's steps go to PATH.worker-I; "
                 "tools/trace/plot_steps.py renders it");
  app.add_option("--http-port", flags.http_port,
                 "serve the OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, "
                 "/v1/models, /health, /tokenize, /detokenize) on this port (0 = off; -1 = any "
                 "free port, printed)")
      ->capture_default_str()->check(CLI::Range(-1, 65535))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--http-host", flags.http_host, "address for the HTTP API (default: the host "
                 "of --listen)");
  bool no_web_console = false;
  app.add_flag("--no-web-console", no_web_console,
               "do not serve the web console (GET /: a chat playground and the live batch view) "
               "on the HTTP port");
  app.add_option("--http-threads", flags.http_threads,
                 "HTTP handler threads: how many generation and (de)tokenization requests run "
                 "at once (more wait in a bounded queue; /health never waits)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  AddHttpLimitOptions(app, flags);
  app.add_option("--api-key", flags.api_key,
                 "require `authorization: Bearer KEY` on the public gRPC and HTTP APIs "
                 "(default: $TESSERA_API_KEY, else none)");
  app.add_option("--worker-secret", flags.engine.worker_secret,
                 "the router⇄worker shared secret (default: $TESSERA_WORKER_SECRET, else none)");
  app.add_option("--tls-cert", flags.tls_cert, "PEM certificate (chain): serve gRPC and HTTP "
                 "over TLS")->check(CLI::ExistingFile);
  app.add_option("--tls-key", flags.tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return Fail(e.what());  // one line, which `tessera serve` quotes
  }
  flags.engine.enable_prefix_cache = !no_prefix_cache;
  flags.web_console = !no_web_console;
  // Secrets may come from the environment, which keeps them off the command line (ps).
  if (const char* key = std::getenv("TESSERA_API_KEY"); flags.api_key.empty() && key != nullptr) {
    flags.api_key = key;
  }
  if (const char* secret = std::getenv("TESSERA_WORKER_SECRET");
      flags.engine.worker_secret.empty() && secret != nullptr) {
    flags.engine.worker_secret = secret;
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return Fail("--tls-cert and --tls-key go together");
  }
  if (!flags.worker_metrics.empty() && flags.worker_metrics.size() != flags.workers.size()) {
    return Fail("give one --worker-metrics per --worker, in the same order");
  }
  absl::StatusOr<spdlog::level::level_enum> log_level =
      tessera::router::ParseLogLevel(flags.log_level);
  if (!log_level.ok()) return Fail(std::string(log_level.status().message()));
  flags.engine.log = tessera::router::MakeStderrLogger(*log_level);
  flags.engine.preemption_storm_window = std::chrono::milliseconds(
      static_cast<int64_t>(flags.preemption_storm_window_s * 1000));
  flags.engine.max_queue_time =
      std::chrono::milliseconds(static_cast<int64_t>(flags.max_queue_time_s * 1000));
  flags.engine.stream_stall_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(flags.stream_stall_timeout_s * 1000));

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts

  absl::StatusOr<std::unique_ptr<tessera::router::ModelFrontend>> model =
      tessera::router::LoadModelFrontend(flags.model_path, flags.chat_template_path,
                                         flags.served_model_names);
  if (!model.ok()) return Fail(std::string(model.status().message()));

  auto registry = std::make_shared<prometheus::Registry>();
  const std::unique_ptr<tessera::router::console::StepFeed> console_feed =
      MakeConsoleFeed(flags, *registry);
  absl::StatusOr<std::vector<std::unique_ptr<tessera::router::StepRecorder>>> recorders =
      MakeStepRecorders(flags, console_feed.get());
  if (!recorders.ok()) return Fail(std::string(recorders.status().message()));
  tessera::router::GatewayMetrics gateway(registry, flags.workers.size());
  std::vector<std::unique_ptr<tessera::router::RouterMetrics>> metrics;
  const std::unique_ptr<RequestEngine> engine_owner =
      MakeEngines(flags, model->get(), registry, &gateway, *recorders, &metrics);
  RequestEngine& engine = *engine_owner;
  tessera::router::TesseraService service(&engine, model->get(), flags.api_key);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentials(flags);
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
  // Malformed requests make libprotobuf log; a client must not be able to flood stderr with it.
  tessera::router::InstallProtobufLogLimit(absl::Seconds(10));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(flags.listen, *credentials, &port);
  builder.RegisterService(&service);
  // Above BuildRequest's own kMaxRequestBytes, so oversized requests get the field-naming error.
  builder.SetMaxReceiveMessageSize(tessera::router::kMaxGrpcMessageBytes);
  // gRPC sets SO_REUSEPORT by default: a second server on a busy port would bind silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return Fail("cannot listen on " + flags.listen);
  // Declared after the engine: stopped (by its destructor) before the engine it asks goes away.
  const std::shared_ptr<prometheus::Collectable> served_metrics = ServedMetrics(flags, registry);
  absl::StatusOr<std::unique_ptr<tessera::metrics::MetricsServer>> metrics_server =
      StartMetricsServer(flags, served_metrics, engine);
  if (!metrics_server.ok()) return Fail(std::string(metrics_server.status().message()));
  absl::StatusOr<std::unique_ptr<tessera::router::openai::OpenAiServer>> http_server =
      StartHttpServer(flags, &engine, model->get(), served_metrics, console_feed.get());
  if (!http_server.ok()) return Fail(std::string(http_server.status().message()));
  engine.Start();

  const std::string host = flags.listen.substr(0, flags.listen.rfind(':'));
  std::printf("tessera-router listening on %s:%d\n", host.c_str(), port);
  std::fflush(stdout);
  ServeUntilSignal(*server, engine, signals);
  std::fprintf(stderr, "tessera-router: draining\n");
  Drain(*server, engine, *http_server, flags.drain_timeout_s);
  for (auto& recorder : *recorders) recorder->Close();  // the engines have stopped: no more steps
  return 0;
}
