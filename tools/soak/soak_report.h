// The soak's tallies and verdict: requests by behaviour and by final gRPC status, unexpected ends
// (with a few examples), the end state read from the server, RSS windows (rss_window.h), kills
// and restores; Print writes the summary, Failures lists each failed check.
//
// Kill windows: a kill opens one (BeginKill, just before the signal) and the router seeing a
// worker again closes it (EndKill). UNAVAILABLE is an expected end only for a request whose
// [start, end] overlaps a kill window; with the worker up it is a failure.
//
// Threading: Record, num_recorded and the kill/RSS-window calls may come from every client
// thread and the killer thread (one mutex); the rest from the main thread after they joined.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "tools/soak/rss_window.h"
#include "tools/soak/soak_options.h"
#include "tools/soak/soak_request.h"

namespace tessera::soak {

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

  using Clock = std::chrono::steady_clock;

  // A measured request that ran from `started` to `ended`.
  void Record(const SoakRequest& plan, const SoakOutcome& outcome, Clock::time_point started,
              Clock::time_point ended);

  int num_recorded() const;
  void set_duration_s(double s) { duration_s_ = s; }
  void set_end_state(const EndState& end) { end_ = end; }
  void BeginKill(int pid);  // just before kill -9 of `pid`
  void EndKill();           // the router sees a worker again
  void AddRssWindow(RssWindow window);

  // One line per failed check; empty when the soak passed.
  std::vector<std::string> Failures() const;
  void Print(std::FILE* out) const;

 private:
  struct KillWindow {
    Clock::time_point begin;
    std::optional<Clock::time_point> end;  // open until the worker is back
  };
  bool DuringKill(Clock::time_point started, Clock::time_point ended) const;  // mutex_ held
  void PrintTallies(std::FILE* out) const;  // mutex_ held

  const SoakOptions& options_;
  mutable std::mutex mutex_;
  int recorded_ = 0;
  std::array<int, kNumBehaviours> by_behaviour_{};
  std::map<std::string, int> by_status_;
  int unexpected_ = 0;
  std::vector<std::string> unexpected_examples_;
  int64_t tokens_ = 0;
  double duration_s_ = 0;
  std::vector<RssWindow> rss_windows_;
  EndState end_;
  std::vector<int> killed_pids_;
  std::vector<KillWindow> kill_windows_;
};

}  // namespace tessera::soak
