// The system under soak: one `tessera serve` child (which supervises tessera-worker and
// tessera-router and restarts a dead worker), its addresses, its children's pids and memory, the
// router's ServerStats and /metrics, and the chaos action (kill -9 of the worker).
//
// Ownership/threading: the soak's main thread creates, starts and stops it; KillWorker, Stats,
// Metric and the /proc readers are safe from any thread (they only read /proc, send signals or
// make their own RPCs).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/process/child_process.h"
#include "tessera/v1/tessera.grpc.pb.h"

namespace tessera::soak {

class ServeTarget {
 public:
  ~ServeTarget();  // Stop()

  // Runs `tessera serve --port 0 --http-port -1 --metrics-port 0 <serve_args>` (gRPC, the
  // OpenAI HTTP door and the metrics port on free ports) and waits (up to 300 s) for its
  // "listening on" line.
  absl::Status Start(const std::string& tessera_path, const std::vector<std::string>& serve_args);
  // SIGTERM (the router drains), then SIGKILL after 60 s. The exit status as text.
  std::string Stop();

  const std::string& address() const { return address_; }        // gRPC HOST:PORT
  const std::string& http_address() const { return http_address_; }  // OpenAI HTTP HOST:PORT
  // Whether `tessera serve` itself is still running (owner thread only).
  bool Alive();
  // The live tessera-router / tessera-worker child of `tessera serve`; -1 when there is none.
  pid_t RouterPid() const;
  pid_t WorkerPid() const;
  // SIGKILL to the current worker; its pid. NOT_FOUND when no worker runs.
  absl::StatusOr<pid_t> KillWorker() const;

  ::tessera::v1::ServerStatsResponse Stats() const;  // empty on an RPC error
  // The value of the router's unlabelled Prometheus sample `name` (e.g.
  // "tessera_worker_restores_total"); NOT_FOUND when absent.
  absl::StatusOr<double> Metric(const std::string& name) const;
  // Polls ServerStats until a worker is connected, up to `timeout_s`.
  bool WaitConnected(double timeout_s) const;

 private:
  std::unique_ptr<process::ChildProcess> serve_;
  std::string address_;
  std::string http_address_;
  std::string metrics_address_;
  std::unique_ptr<::tessera::v1::Tessera::Stub> stub_;
};

// Resident set size of `pid` in MiB (VmRSS in /proc/PID/status); -1 when unreadable.
double RssMiB(pid_t pid);
// The pid of `parent`'s child whose command name is `name`, or -1.
pid_t ChildPid(pid_t parent, const std::string& name);

}  // namespace tessera::soak
