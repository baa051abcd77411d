// The soak's tallies and verdict: requests by behaviour and by final gRPC status, unexpected ends
// (with a few examples), the end state read from the server, RSS before/after, kills and
// restores; Print writes the summary, Failures lists each failed check.
//
// Threading: Record may be called from every client thread (one mutex); the rest from the main
// thread after the clients have joined.
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "tools/soak/soak_options.h"
#include "tools/soak/soak_request.h"

namespace tessera::soak {

struct RssSample {
  double router_mib = -1;
  double worker_mib = -1;
};

// What the server reported once the load was over.
struct EndState {
  bool worker_connected = false;
  int running = -1;
  int waiting = -1;
  int64_t kv_blocks_used = -1;
  int worker_active_slots = -1;
  double preemptions = -1;   // tessera_preemptions_total
  double restores = -1;      // tessera_worker_restores_total
  bool serve_alive = false;  // tessera serve still running (no crash of the supervisor)
};

class SoakReport {
 public:
  explicit SoakReport(const SoakOptions& options) : options_(options) {}

  void Record(const SoakRequest& plan, const SoakOutcome& outcome);

  int num_recorded() const;
  void set_duration_s(double s) { duration_s_ = s; }
  void set_rss(const RssSample& before, const RssSample& after) {
    rss_before_ = before;
    rss_after_ = after;
  }
  void set_end_state(const EndState& end) { end_ = end; }
  void AddKill(int pid) { killed_pids_.push_back(pid); }

  // One line per failed check; empty when the soak passed.
  std::vector<std::string> Failures() const;
  void Print(std::FILE* out) const;

 private:
  bool RssFlat(double before, double after) const;

  const SoakOptions& options_;
  mutable std::mutex mutex_;
  int recorded_ = 0;
  std::array<int, kNumBehaviours> by_behaviour_{};
  std::map<std::string, int> by_status_;
  int unexpected_ = 0;
  std::vector<std::string> unexpected_examples_;
  int64_t tokens_ = 0;
  double duration_s_ = 0;
  RssSample rss_before_, rss_after_;
  EndState end_;
  std::vector<int> killed_pids_;
};

}  // namespace tessera::soak
