#include "tools/cli/serve_workers.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/cuda/device_query.h"

namespace tessera::cli {

// One worker child and its restart state.
struct ServeWorkers::Worker {
  std::string name;               // "tessera-worker" (one worker) or "tessera-worker 1"
  std::vector<std::string> args;  // --listen 127.0.0.1:0 until it first listens, then its port
  std::unique_ptr<process::ChildProcess> process;
  std::string address;            // HOST:PORT the router dials; a restart reuses it
  ChildAddresses announced;
  bool down = false;              // died; next restart try at restart_at
  absl::Time restart_at;
  absl::Duration backoff;
  int restarts = 0;
};

namespace {

constexpr absl::Duration kFirstBackoff = absl::Milliseconds(500);
constexpr absl::Duration kMaxBackoff = absl::Seconds(30);
// Worker `index`'s arguments, listening on any free loopback port (and serving its metrics on
// one too when the router's /metrics is to carry them).
std::vector<std::string> WorkerArgs(const ServeOptions& o, int index,
                                    const std::vector<int>& cuda_devices) {
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
  // The worker's first device; a tensor-parallel worker takes the next ones after it.
  if (!cuda_devices.empty()) {
    args.insert(args.end(), {"--cuda-device", absl::StrCat(cuda_devices[0])});
  }
  AddIfSet(args, "--tensor-parallel", o.tensor_parallel, 1);
  AddIfSet(args, "--dtype", o.dtype);
  AddIfSet(args, "--gpu-memory-utilization", o.gpu_memory_utilization, 0.0);
  AddIfSet(args, "--cuda-graphs", o.cuda_graphs);
  // The worker sizes its step buffers from it (cuda); the router plans within what it reports.
  AddIfSet(args, "--max-num-batched-tokens", o.max_num_batched_tokens, 0);
  if (o.batch_invariant) args.push_back("--batch-invariant");
  if (o.dequantize_weights) args.push_back("--dequantize-weights");
  if (o.mmap_weights) args.push_back("--mmap-weights");
  if (o.worker_metrics_port >= 0) {
    const int port = o.worker_metrics_port == 0 ? 0 : o.worker_metrics_port + index;
    args.insert(args.end(), {"--metrics-host", o.metrics_host, "--metrics-port",
                             absl::StrCat(port)});
  } else if (RouterServesMetrics(o)) {  // on loopback, for the router's /metrics only
    args.insert(args.end(), {"--metrics-host", "127.0.0.1", "--metrics-port", "0"});
  }
  args.insert(args.end(), o.worker_args.begin(), o.worker_args.end());
  return args;
}

}  // namespace

bool RouterServesMetrics(const ServeOptions& o) { return o.metrics_port >= 0 || o.http_port != 0; }

absl::StatusOr<std::vector<std::vector<int>>> WorkerCudaDevices(const ServeOptions& o) {
  std::vector<std::vector<int>> devices(static_cast<size_t>(o.workers));
  const bool cuda = o.device == "cuda";
  const bool automatic = o.device.empty() || o.device == "auto";
  const int per_worker = o.tensor_parallel;
  if (per_worker > 1 && !cuda && o.device != "emulated") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tensor-parallel ", per_worker, " needs --device cuda or emulated (the cpu backend "
        "runs on one device)"));
  }
  if (o.workers * per_worker == 1 || !(cuda || automatic)) return devices;
  absl::StatusOr<std::vector<cuda::CudaDeviceInfo>> visible = cuda::QueryCudaDevices();
  if (!visible.ok() && automatic) return devices;  // cpu workers
  if (!visible.ok()) {
    return absl::Status(visible.status().code(),
                        absl::StrCat("--device cuda: ", visible.status().message()));
  }
  const int needed = o.workers * per_worker;
  if (needed > static_cast<int>(visible->size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers ", o.workers, " needs ", needed, " CUDA devices (", per_worker,
        " per worker); ", visible->size(), " visible",
        automatic ? " (--device cpu runs cpu workers)" : ""));
  }
  for (int i = 0; i < o.workers; ++i) {
    for (int d = 0; d < per_worker; ++d) {
      devices[static_cast<size_t>(i)].push_back(i * per_worker + d);
    }
  }
  return devices;
}

ServeWorkers::ServeWorkers(const ServeOptions& options, const ChildLauncher& launcher,
                           std::vector<std::vector<int>> cuda_devices, std::string secret_env)
    : options_(options), launcher_(launcher), secret_env_(std::move(secret_env)) {
  for (int i = 0; i < options.workers; ++i) {
    auto worker = std::make_unique<Worker>();
    worker->name = options.workers == 1 ? kWorkerBinary : absl::StrCat(kWorkerBinary, " ", i);
    worker->args = WorkerArgs(options, i, cuda_devices[static_cast<size_t>(i)]);
    workers_.push_back(std::move(worker));
  }
}

ServeWorkers::~ServeWorkers() = default;

absl::Status ServeWorkers::Spawn(Worker& worker) {
  absl::StatusOr<std::unique_ptr<process::ChildProcess>> process =
      launcher_.Start(kWorkerBinary, worker.name, worker.args, {secret_env_});
  if (!process.ok()) return process.status();
  worker.process = *std::move(process);
  return absl::OkStatus();
}

absl::Status ServeWorkers::AwaitListening(Worker& worker, int* stop_signal) {
  absl::StatusOr<std::string> address =
      launcher_.AwaitListening(*worker.process, kWorkerBinary, &worker.announced, stop_signal);
  if (!address.ok()) return address.status();
  worker.address = *address;
  // A restart listens on the same ports, so the router's redial and metrics reads find it.
  auto listen = std::find(worker.args.begin(), worker.args.end(), "--listen");
  *(listen + 1) = absl::StrCat("127.0.0.1:", address->substr(address->rfind(':') + 1));
  auto metrics = std::find(worker.args.begin(), worker.args.end(), "--metrics-port");
  if (metrics != worker.args.end() && !worker.announced.metrics.empty()) {
    *(metrics + 1) = worker.announced.metrics.substr(worker.announced.metrics.rfind(':') + 1);
  }
  return absl::OkStatus();
}

absl::Status ServeWorkers::StartAll(int* stop_signal) {
  // All spawned first, so they load their models at the same time.
  for (auto& worker : workers_) {
    if (absl::Status spawned = Spawn(*worker); !spawned.ok()) return spawned;
  }
  for (auto& worker : workers_) {
    if (absl::Status listening = AwaitListening(*worker, stop_signal); !listening.ok()) {
      return listening;
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ServeWorkers::addresses() const {
  std::vector<std::string> addresses;
  for (const auto& worker : workers_) addresses.push_back(worker->address);
  return addresses;
}

std::vector<std::string> ServeWorkers::metrics_addresses() const {
  std::vector<std::string> addresses;
  for (const auto& worker : workers_) {
    if (!worker->announced.metrics.empty()) addresses.push_back(worker->announced.metrics);
  }
  return addresses;
}

absl::Status ServeWorkers::Tend(int* stop_signal) {
  for (auto& worker : workers_) {
    if (!worker->down) {
      const std::optional<process::ChildExit> exit = worker->process->Poll();
      if (!exit.has_value()) continue;
      const std::string died = Died(*worker->process, *exit, "unexpectedly");
      if (options_.no_restart) return absl::UnavailableError(died);
      std::fprintf(stderr, "tessera serve: %s; restarting it\n", died.c_str());
      worker->down = true;
      worker->backoff = kFirstBackoff;
      worker->restart_at = absl::Now() + worker->backoff;
    }
    if (absl::Now() < worker->restart_at) continue;
    Restart(*worker, stop_signal);
    if (*stop_signal != 0) return Interrupted(*stop_signal);
  }
  return absl::OkStatus();
}

void ServeWorkers::Restart(Worker& worker, int* stop_signal) {
  absl::Status status = Spawn(worker);
  if (status.ok()) status = AwaitListening(worker, stop_signal);
  if (status.ok()) {
    ++worker.restarts;
    worker.down = false;
    std::fprintf(stderr, "tessera serve: restarted %s on %s (restart %d)\n", worker.name.c_str(),
                 worker.address.c_str(), worker.restarts);
    return;
  }
  if (*stop_signal != 0) return;
  worker.backoff = std::min(worker.backoff * 2, kMaxBackoff);
  worker.restart_at = absl::Now() + worker.backoff;
  std::fprintf(stderr, "tessera serve: restarting %s failed (%s); next try in %s\n",
               worker.name.c_str(), std::string(status.message()).c_str(),
               absl::FormatDuration(worker.backoff).c_str());
}

absl::Status ServeWorkers::StopAll() {
  absl::Status first;
  for (auto& worker : workers_) {
    if (worker->process == nullptr || worker->process->Poll().has_value()) continue;
    const process::ChildExit exit = StopChild(*worker->process, SIGTERM, kExitGrace);
    // A worker without a SIGTERM handler ends by the signal: that is a clean stop too.
    if (!exit.success() && exit.signal != SIGTERM && first.ok()) {
      first = absl::InternalError(Died(*worker->process, exit, "badly while stopping"));
    }
  }
  return first;
}

}  // namespace tessera::cli
