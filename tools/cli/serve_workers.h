// The tessera-worker children of `tessera serve --workers N` (data parallel, DESIGN.md §12): one
// per worker, each on its own loopback port with the run's shared worker secret, each restarted
// on its own port with its own backoff (0.5 s doubling to 30 s) when it dies, while the others
// keep serving. The router gets every address as a repeated --worker.
//
// Devices: on --device cuda (or auto where CUDA devices are visible) with more than one worker,
// worker i gets --cuda-device i; more workers than devices is a one-line error. On cpu each
// worker is a cpu worker (--threads is per worker); on emulated each has its own emulated device.
// Metrics: --worker-metrics-port 0 gives every worker a free port; P > 0 gives worker i P + i.
// Without it, whenever the router serves /metrics (RouterServesMetrics), each worker serves its
// metrics on a free loopback port, which the router reads and re-serves labelled worker="i"
// (one scrape target). A restarted worker reuses its metrics port as it reuses its listen port.
//
// Threading: the supervisor's main thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/process/child_process.h"
#include "tools/cli/commands.h"
#include "tools/cli/serve_children.h"

namespace tessera::cli {

// The CUDA devices of each of the options.workers workers: worker i gets
// [i * T, i * T + T) with T devices per worker (1 until --tensor-parallel), on --device cuda or
// auto with CUDA devices visible and more than one worker; empty lists otherwise (a single
// worker picks its own device). One-line errors: no CUDA device on --device cuda, or fewer
// devices than the workers need.
absl::StatusOr<std::vector<std::vector<int>>> WorkerCudaDevices(const ServeOptions& options);

// Whether the router serves /metrics (on --metrics-port, or on the HTTP API's port).
bool RouterServesMetrics(const ServeOptions& options);

class ServeWorkers {
 public:
  // `cuda_devices`: WorkerCudaDevices(options). `secret_env`: TESSERA_WORKER_SECRET=..., given
  // to every worker (and every restart).
  ServeWorkers(const ServeOptions& options, const ChildLauncher& launcher,
               std::vector<std::vector<int>> cuda_devices, std::string secret_env);
  ~ServeWorkers();

  // Starts every worker, then waits until each listens. A stop signal meanwhile lands in
  // *stop_signal (CANCELLED).
  absl::Status StartAll(int* stop_signal);
  // HOST:PORT of each worker, by index: the router's --worker list.
  std::vector<std::string> addresses() const;
  // The "metrics on" address of each worker that announced one, by index.
  std::vector<std::string> metrics_addresses() const;
  // One supervision turn: a worker found dead is restarted once its backoff has passed
  // (UNAVAILABLE naming it with --no-restart instead). A stop signal during a restart lands in
  // *stop_signal (CANCELLED).
  absl::Status Tend(int* stop_signal);
  // SIGTERM to every live worker; the first one that ended badly (a SIGTERM death is clean).
  absl::Status StopAll();

 private:
  struct Worker;
  absl::Status Spawn(Worker& worker);
  // Waits for its listening line; then its --listen names that port, for restarts.
  absl::Status AwaitListening(Worker& worker, int* stop_signal);
  // One restart try; a failure doubles the backoff (to 30 s) and sets the next try's time.
  void Restart(Worker& worker, int* stop_signal);

  const ServeOptions& options_;
  const ChildLauncher& launcher_;
  const std::string secret_env_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace tessera::cli
