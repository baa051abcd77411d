// Test harness: `tessera serve` (build/bin/tessera, which starts tessera-worker and
// tessera-router itself) as one real child process, with the addresses it prints on start.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/process/child_process.h"

namespace tessera::e2e {

class ServeProcess {
 public:
  ~ServeProcess();  // SIGTERM, then SIGKILL of what is still running

  // Runs `tessera serve --port 0 --http-port 0 <args>` and reads its stdout until "tessera serve:
  // listening on HOST:PORT"; the "router metrics on", "worker metrics on" (one per worker) and
  // "http on" lines before it are kept. A process that exits first is an error carrying its
  // stderr tail.
  absl::Status Start(const std::vector<std::string>& args, double timeout_s = 180);
  // SIGTERM; the exit code (-1 if it had to be killed after `timeout_s`).
  int Stop(double timeout_s = 60);

  const std::string& address() const { return address_; }
  const std::string& router_metrics_address() const { return router_metrics_address_; }
  // The first worker's; worker_metrics_addresses() has one per worker (--workers N).
  const std::string& worker_metrics_address() const { return worker_metrics_addresses_.front(); }
  const std::vector<std::string>& worker_metrics_addresses() const {
    return worker_metrics_addresses_;
  }
  const std::string& http_address() const { return http_address_; }
  std::string StderrTail() const;
  // The pid of the `tessera serve` process (-1 before Start).
  int pid() const;

 private:
  std::unique_ptr<process::ChildProcess> child_;
  std::string address_;
  std::string router_metrics_address_;
  std::vector<std::string> worker_metrics_addresses_ = {""};
  std::string http_address_;
};

}  // namespace tessera::e2e
