// `tessera-worker`: loads a model (or, with --load-format dummy, makes random weights of a named
// shape on the device), builds its runner (runner_factory.h: cpu, or cuda on a GPU or the
// emulated device) and KV pool, and serves the
// `tessera.worker.v1.Worker` step protocol (plus the standard gRPC health service) until SIGINT
// or SIGTERM.
//
// Once serving it prints `tessera-worker listening on HOST:PORT` to stdout (the bound port, so
// `--listen 127.0.0.1:0` works), which `tessera serve` and the e2e tests wait for. With
// --metrics-port it first prints `tessera-worker metrics on HOST:PORT`, before loading: Prometheus
// /metrics, /healthz and /readyz (503 "starting up: <phase>: 47% (..., ETA 4 s)" during the
// start-up, ready once the model is loaded and until the worker shuts down). Long start-up
// phases (weights upload, eager graph capture) print progress with rate and ETA to stderr
// (common/util/load_progress.h). Errors (bad flags, a model that does not load, an address that
// cannot be bound) are one line on stderr and exit status 1. A signal during the start-up exits
// at once (0); afterwards it shuts the server down gracefully (in-flight streams get a short
// deadline) and exits 0.
//
// Threading: main blocks SIGINT/SIGTERM before any thread starts (so every thread inherits the
// mask); a watcher thread waits for them with sigwait; main loads and serves; gRPC threads
// serve RPCs; the service's step thread drives the runner, whose thread pool runs the kernels.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/registry.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/metrics/metrics_server.h"
#include "common/tokenizer/tokenizer.h"
#include "common/util/absl_compat.h"
#include "common/util/load_progress.h"
#include "common/util/status_macros.h"
#include "worker/runner_factory.h"
#include "worker/loaded_model.h"
#include "worker/worker_metrics.h"
#include "worker/worker_service.h"

namespace tessera::worker {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr auto kShutdownGrace = std::chrono::seconds(2);

// gRPC's own log lines, one line each on stderr (ours: "tessera-worker: ..."), or none while
// muted.
std::atomic<bool> grpc_log_muted{false};

void LogGrpc(gpr_log_func_args* args) {
  if (grpc_log_muted.load()) return;
  std::fprintf(stderr, "tessera-worker: grpc %s: %s (%s:%d)\n",
               gpr_log_severity_string(args->severity), args->message, args->file, args->line);
}

struct WorkerFlags {
  std::string model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string listen = "127.0.0.1:0";
  RunnerFlags runner;          // backend, device, dtype, KV pool, graphs (runner_factory.h)
  bool mmap_weights = false;   // map the GGUF instead of copying it into huge pages
  std::string metrics_host = "127.0.0.1";
  int metrics_port = -1;       // -1 = no metrics server; 0 = any free port
  std::string secret;          // router⇄worker shared secret; "" = none
};

absl::Status CheckFlags(const WorkerFlags& flags) {
  const RunnerFlags& r = flags.runner;
  if (r.threads < 0) return absl::InvalidArgumentError("--threads must be >= 0");
  if (r.block_size < 1) return absl::InvalidArgumentError("--block-size must be >= 1");
  if (r.num_kv_blocks != 0 && r.num_kv_blocks < 2) {
    return absl::InvalidArgumentError(
        "--num-kv-blocks must be 0 (size from --kv-cache-mb) or >= 2 (block 0 is reserved)");
  }
  if (r.kv_cache_mb < 0) return absl::InvalidArgumentError("--kv-cache-mb must be >= 0");
  if (r.state_snapshot_mb < 0) {
    return absl::InvalidArgumentError("--state-snapshot-mb must be >= 0");
  }
  if (r.max_num_seqs < 1) return absl::InvalidArgumentError("--max-num-seqs must be >= 1");
  if (r.max_num_batched_tokens < 1) {
    return absl::InvalidArgumentError("--max-num-batched-tokens must be >= 1");
  }
  if (!(r.gpu_memory_utilization > 0 && r.gpu_memory_utilization <= 1)) {
    return absl::InvalidArgumentError("--gpu-memory-utilization must be in (0, 1]");
  }
  if (absl::StatusOr<bool> dummy = IsDummyLoadFormat(r.load_format); !dummy.ok()) {
    return dummy.status();
  }
  if (r.dummy_vocab < 0) return absl::InvalidArgumentError("--dummy-vocab must be >= 0");
  if (r.emulated_memory_mb < 1) {
    return absl::InvalidArgumentError("--emulated-memory-mb must be >= 1");
  }
  if (flags.metrics_port < -1 || flags.metrics_port > 65535) {
    return absl::InvalidArgumentError("--metrics-port must be in [0, 65535]");
  }
  const size_t colon = flags.listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == flags.listen.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen must be HOST:PORT, got '", flags.listen, "'"));
  }
  return absl::OkStatus();
}

// Everything the server borrows, in construction order (destroyed in reverse).
struct Worker {
  // Start-up progress (weights upload, graph capture): printed, and /readyz's 503 until loaded.
  std::unique_ptr<util::LoadProgress> progress;
  std::atomic<bool> loaded{false};
  // The metrics registry exists before the model loads, so /metrics, /healthz and /readyz answer
  // during the load; the worker's series join it once the runner is built.
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<LoadedModel> model;  // null with --load-format dummy
  BuiltRunner runner;  // the runner and its thread pool (cpu)
  std::unique_ptr<WorkerMetrics> metrics;
  std::unique_ptr<WorkerService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<metrics::MetricsServer> metrics_server;  // null without --metrics-port
  std::atomic<bool> shutting_down{false};                  // /readyz turns 503
};

// The tokens Describe reports: a model file's come from its tokenizer, a dummy shape's from the
// shape (common/model/synthetic_shapes.h).
struct SpecialTokens {
  int32_t bos_id = -1;
  std::vector<int32_t> eos_ids;
  std::optional<GrammarVocabulary> grammar_vocabulary;  // none without a tokenizer
};

// Loads the model file (none with --load-format dummy) and builds the runner.
absl::StatusOr<SpecialTokens> BuildWorkerRunner(const WorkerFlags& flags, Worker* worker) {
  TESSERA_ASSIGN_OR_RETURN(const bool dummy, IsDummyLoadFormat(flags.runner.load_format));
  SpecialTokens tokens;
  if (dummy) {
    TESSERA_ASSIGN_OR_RETURN(worker->runner, BuildDummyRunner(flags.runner));
    tokens.bos_id = worker->runner.synthetic->bos_token_id;
    tokens.eos_ids.push_back(worker->runner.synthetic->eos_token_id);
    return tokens;
  }
  TESSERA_ASSIGN_OR_RETURN(worker->model, LoadModel(flags.model_path,
                                                      flags.mmap_weights
                                                          ? util::FileLoad::kMap
                                                          : util::FileLoad::kHugePageCopy));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tok,
                           tokenizer::Tokenizer::FromGguf(*worker->model->file));
  TESSERA_ASSIGN_OR_RETURN(worker->runner,
                           BuildRunner(flags.runner, *worker->model, worker->progress.get()));
  tokens.bos_id = tok->info().bos_id;
  if (tok->info().eos_id >= 0) tokens.eos_ids.push_back(tok->info().eos_id);
  tokens.grammar_vocabulary = GrammarVocabularyOf(*tok);
  return tokens;
}

absl::Status Start(const WorkerFlags& flags, Worker* worker, int* port) {
  TESSERA_ASSIGN_OR_RETURN(const SpecialTokens tokens, BuildWorkerRunner(flags, worker));
  if (!worker->runner.selection.empty()) {
    std::fprintf(stderr, "tessera-worker: %s\n", worker->runner.selection.c_str());
  }
  const BuiltRunner& built = worker->runner;
  for (const WeightStorage& s : built.weight_storage) {
    std::fprintf(stderr, "tessera-worker: weights %s%s: %d tensor%s, %.1f MiB, %.3f B/parameter\n",
                 s.format.c_str(), s.packed ? " packed" : "", s.tensors, s.tensors == 1 ? "" : "s",
                 static_cast<double>(s.bytes) / (1 << 20), s.bytes_per_parameter());
  }
  const int max_num_seqs = flags.runner.max_num_seqs;
  worker->metrics = std::make_unique<WorkerMetrics>(
      worker->registry,
      WorkerMetricsOptions{.max_num_seqs = max_num_seqs,
                           .kv_pool_bytes = built.runner->kv_pool().bytes,
                           .measure_gpu_busy = built.has_device});
  const model::ModelConfig& config = built.runner->config();
  WorkerServiceOptions options{.max_num_seqs = max_num_seqs,
                               .model_name = "",
                               .eos_token_ids = tokens.eos_ids,
                               .bos_token_id = tokens.bos_id,
                               .device = built.description,
                               .max_num_batched_tokens = built.max_num_batched_tokens,
                               .graph_buckets = built.graph_buckets,
                               .device_memory_bytes = built.device_memory_bytes,
                               .weights_bytes = built.weights_bytes,
                               .weights_load_seconds = built.weights_load_seconds,
                               .weight_storage = built.weight_storage,
                               .metrics = worker->metrics.get(),
                               .secret = flags.secret,
                               .grammar_vocabulary = tokens.grammar_vocabulary
                                                         ? &*tokens.grammar_vocabulary
                                                         : nullptr};
  if (config.name.empty()) {
    options.model_name = std::filesystem::path(flags.model_path).stem().string();
  }
  worker->service = std::make_unique<WorkerService>(built.runner.get(), options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(flags.listen, grpc::InsecureServerCredentials(), port);
  builder.RegisterService(worker->service.get());
  // gRPC sets SO_REUSEPORT by default: a second worker on a busy port would bind silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A plan admitting many long prompts carries every token of each (up to 5 bytes a varint),
  // far beyond gRPC's 4 MiB default for received messages.
  const int64_t max_plan_bytes =
      int64_t{max_num_seqs} * config.context_length * 5 + (int64_t{1} << 20);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<int64_t>(max_plan_bytes, std::numeric_limits<int>::max())));
  // gRPC logs a bind failure itself (a long nested error); the error we return says it in one
  // line, so its log is muted while building.
  grpc_log_muted.store(true);
  worker->server = builder.BuildAndStart();
  grpc_log_muted.store(false);
  if (worker->server == nullptr || *port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", flags.listen));
  }
  const KvPoolInfo kv = built.runner->kv_pool();
  const ModelLayerInfo layers = built.runner->layer_info();
  // A hybrid's linear-attention layers hold a recurrent state per sequence instead of K/V.
  const std::string state =
      layers.linear_layers == 0
          ? std::string()
          : absl::StrFormat(", recurrent state %.2f MiB per sequence (%d linear-attention layers)",
                            static_cast<double>(layers.state_bytes_per_sequence) / kMiB,
                            layers.linear_layers);
  std::fprintf(stderr, "%s\n",
               absl::StrFormat("tessera-worker: %s (%s), %d KV blocks of %d tokens (%.0f MiB)%s, "
                               "max %d sequences, %s",
                               worker->service->description().model_name(), config.architecture,
                               kv.num_blocks, kv.block_size,
                               static_cast<double>(kv.bytes) / kMiB, state, max_num_seqs,
                               options.device)
                   .c_str());
  return absl::OkStatus();
}

// With --metrics-port: serves /metrics, /healthz, /readyz from before the model loads and prints
// "tessera-worker metrics on HOST:PORT" (before the listening line, so a supervisor reading up to
// that line sees both). /readyz is 503 while loading (saying how far the load is) and while
// shutting down.
absl::Status StartMetricsServer(const WorkerFlags& flags, Worker* worker) {
  if (flags.metrics_port < 0) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(
      worker->metrics_server,
      metrics::MetricsServer::Start(
          worker->registry,
          {.host = flags.metrics_host,
           .port = flags.metrics_port,
           .readiness = [worker]() -> absl::Status {
             if (worker->shutting_down.load()) {
               return absl::UnavailableError("the worker is shutting down");
             }
             if (worker->loaded.load()) return absl::OkStatus();
             const std::string progress = worker->progress->Describe();
             return absl::UnavailableError(
                 absl::StrCat("starting up", progress.empty() ? "" : ": ", progress));
           }}));
  std::printf("tessera-worker metrics on %s:%d\n", flags.metrics_host.c_str(),
              worker->metrics_server->port());
  std::fflush(stdout);  // a supervisor can probe /readyz during the load
  return absl::OkStatus();
}

// The backend, device and sizing options (runner_factory.h).
void AddRunnerOptions(CLI::App& app, RunnerFlags* r) {
  app.add_option("--device", r->device,
                 "backend: auto (cuda when a CUDA GPU is usable, else cpu), cpu, cuda, or "
                 "emulated (the cuda backend on the CPU through the SIMT emulator; slow, for "
                 "tests); default $TESSERA_DEVICE, else auto")
      ->capture_default_str();
  app.add_option("--dtype", r->dtype,
                 "cuda compute type: bf16 (default), f16 or f32 (exactness checks); cpu: f32");
  app.add_option("--threads", r->threads, "cpu kernel threads (0 = hardware threads)")
      ->capture_default_str();
  app.add_option("--block-size", r->block_size, "tokens per KV block")->capture_default_str();
  app.add_option("--num-kv-blocks", r->num_kv_blocks,
                 "KV pool blocks including the null block (0 = from the size flags)")
      ->capture_default_str();
  app.add_option("--kv-cache-mb", r->kv_cache_mb,
                 "KV pool size in MiB (0 = cpu: 2048; cuda: from --gpu-memory-utilization)")
      ->capture_default_str();
  app.add_option("--state-snapshot-mb", r->state_snapshot_mb,
                 "hybrid models: MiB of recurrent-state snapshots for prefix caching (at most 4 "
                 "per sequence slot; 0 = none: a hybrid then shares no prefix)")
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", r->gpu_memory_utilization,
                 "cuda: fraction of device memory for weights, buffers and the KV pool")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", r->kv_cache_dtype,
                 "cpu KV pool elements: f32 (exact) or f16 (half the memory; lossy, docs/perf/cpu.md)")
      ->capture_default_str();
  app.add_option("--max-num-seqs", r->max_num_seqs, "sequence slots")->capture_default_str();
  app.add_option("--max-num-batched-tokens", r->max_num_batched_tokens,
                 "cuda: most tokens one step may carry (sizes the step buffers; the router "
                 "plans within it)")
      ->capture_default_str();
  app.add_option("--activations", r->activations,
                 "cpu matmul activations: f32 (exact) or int8 (lossy, faster batches)")
      ->capture_default_str();
  app.add_option("--cuda-graphs", r->cuda_graphs,
                 "cuda: CUDA graphs (decode steps whole, steps with prefill rows piecewise per "
                 "token bucket) captured lazily (first use), eagerly (start-up) or off; default "
                 "eager on a GPU, lazy on the emulated device");
  app.add_flag("--no-mixed-graphs", r->no_mixed_graphs,
               "cuda: steps with prefill rows run eagerly (graphs for decode-only steps only)");
  app.add_flag("--batch-invariant", r->batch_invariant,
               "cuda: batch-invariant GEMM and attention (a request's results never depend on "
               "its batch; slower); the cpu backend always is");
  app.add_flag("--dequantize-weights", r->dequantize_weights,
               "cuda: dequantize Q8_0/Q4_0/Q4_1/Q4_K/NVFP4/MXFP4 projections to the compute "
               "type at load instead of keeping them packed (more memory; cuBLAS GEMMs)");
  app.add_option("--cuda-device", r->cuda_device,
                 "cuda: device index (0 to the visible devices' count - 1; not with --device "
                 "cpu or emulated)")->capture_default_str();
  app.add_option("--tensor-parallel", r->tensor_parallel,
                 "cuda/emulated: shard the model over N devices (heads, KV heads and FFN "
                 "columns split Megatron-style; on cuda, GPUs --cuda-device..+N-1 over NCCL)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--cuda-dependent-launch", r->cuda_dependent_launch,
                 "cuda: let the decode kernels start while the kernel before them drains "
                 "(Hopper's programmatic dependent launch); false: strictly one after another")
      ->capture_default_str();
  app.add_option("--cuda-packed-stream-grid", r->cuda_packed_stream_grid,
                 "cuda: the batch-1 packed GEMM over projections whose row tiles fit the "
                 "resident blocks: tile (a block per tile) | every (every resident block)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tile", "every"}));
  app.add_flag("--cuda-sync-each-launch", r->cuda_sync_each_launch,
               "cuda bring-up: wait after every kernel launch and GEMM (outside graph capture) "
               "so a device fault is reported by the launch that caused it, naming the kernel; "
               "slow");
  app.add_option("--emulated-memory-mb", r->emulated_memory_mb,
                 "emulated: the emulated device's memory")
      ->capture_default_str();
  app.add_option("--load-format", r->load_format,
                 "auto: weights from --model; dummy: random weights of --dummy-shape generated "
                 "on the device (cuda, emulated), --model not read (benchmarks)")
      ->capture_default_str();
  app.add_option("--dummy-shape", r->dummy_shape,
                 absl::StrCat("dummy: the model shape (", model::SyntheticShapeNames(), ")"));
  app.add_option("--dummy-vocab", r->dummy_vocab,
                 "dummy: vocabulary size replacing the shape's, e.g. the router tokenizer's, so "
                 "every sampled id decodes (0 = the shape's)")
      ->capture_default_str();
  app.add_option("--dummy-weight-format", r->dummy_weight_format,
                 "dummy: projections packed as q8_0, q4_0, q4_1, q4_k, nvfp4 or mxfp4 (default: "
                 "the --dtype)");
  app.add_option("--dummy-seed", r->dummy_seed, "dummy: the random weights' seed")
      ->capture_default_str();
}

int Main(int argc, char** argv) {
  WorkerFlags flags;
  CLI::App app{"tessera-worker: serves the tessera.worker.v1 step protocol on one model"};
  app.add_option("--model", flags.model_path, "GGUF model file or HF safetensors directory")
      ->capture_default_str();
  app.add_option("--listen", flags.listen, "HOST:PORT to serve on (port 0 = any free port)")
      ->capture_default_str();
  AddRunnerOptions(app, &flags.runner);
  app.add_flag("--mmap-weights", flags.mmap_weights,
               "map the model file instead of copying it into huge-page memory (slower steps; "
               "shares the page cache)");
  app.add_option("--metrics-port", flags.metrics_port,
                 "serve Prometheus /metrics, /healthz and /readyz on this port (0 = any free "
                 "port; default: no metrics server)");
  app.add_option("--metrics-host", flags.metrics_host, "address for the metrics server")
      ->capture_default_str();
  app.add_option("--secret", flags.secret,
                 "require this router⇄worker shared secret (`authorization: Bearer`) on "
                 "Describe and Run; default: $TESSERA_WORKER_SECRET, else none");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "tessera-worker: error: %s\n", e.what());
    return 1;
  }
  if (const char* device = std::getenv(kDeviceEnvironment);
      app.get_option("--device")->count() == 0 && device != nullptr && *device != '\0') {
    flags.runner.device = device;
  }
  // --cuda-device picks a GPU; the cpu backend has none and every emulated worker has its own.
  if (app.get_option("--cuda-device")->count() > 0 &&
      (flags.runner.device == "cpu" || flags.runner.device == "emulated")) {
    std::fprintf(stderr,
                 "tessera-worker: error: --cuda-device selects a CUDA GPU (--device cuda or "
                 "auto); --device %s has none to select\n",
                 flags.runner.device.c_str());
    return 1;
  }
  if (const char* secret = std::getenv("TESSERA_WORKER_SECRET");
      flags.secret.empty() && secret != nullptr) {
    flags.secret = secret;  // the environment keeps it off the command line (ps)
  }
  if (absl::Status s = CheckFlags(flags); !s.ok()) {
    std::fprintf(stderr, "tessera-worker: error: %s\n", std::string(s.message()).c_str());
    return 1;
  }

  // Before any thread exists, so that only sigwait below sees these signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  gpr_set_log_function(LogGrpc);
  Worker worker;
  worker.progress = std::make_unique<util::LoadProgress>(util::LoadProgress::Options{
      .prefix = "tessera-worker", .out = stderr, .terminal = isatty(STDERR_FILENO) == 1});
  // A stop signal during a long start-up (an 8B model's upload, eager graph capture) ends the
  // process at once; afterwards it starts the graceful shutdown below.
  std::promise<int> stop_signal;
  std::thread signal_watcher([&signals, &worker, &stop_signal] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    if (!worker.loaded.load()) {
      std::fprintf(stderr, "tessera-worker: signal %d during start-up, exiting\n", signal_number);
      std::fflush(stderr);
      std::_Exit(0);
    }
    stop_signal.set_value(signal_number);
  });
  int port = 0;
  absl::Status started = StartMetricsServer(flags, &worker);
  if (started.ok()) started = Start(flags, &worker, &port);
  if (!started.ok()) {
    std::fprintf(stderr, "tessera-worker: error: %s\n", std::string(started.message()).c_str());
    signal_watcher.detach();  // still in sigwait; the process exits
    return 1;
  }
  worker.loaded.store(true);
  const std::string host = flags.listen.substr(0, flags.listen.rfind(':'));
  std::printf("tessera-worker listening on %s:%d\n", host.c_str(), port);
  std::fflush(stdout);

  const int signal_number = stop_signal.get_future().get();
  signal_watcher.join();
  std::fprintf(stderr, "tessera-worker: signal %d, shutting down\n", signal_number);
  worker.shutting_down.store(true);
  worker.server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  return 0;  // `worker` is destroyed in reverse order: server, service, runner, pool, model
}

}  // namespace
}  // namespace tessera::worker

int main(int argc, char** argv) { return tessera::worker::Main(argc, argv); }
