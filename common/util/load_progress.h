// Progress of a process's long start-up phases (reading the model file, uploading weights to a
// device, capturing CUDA graphs): what is done of how much, the rate and the time left, for the
// person watching and for readiness probes.
//
// A phase that ends within `quiet_period` (1 s) prints nothing (a small model's load stays
// silent, and a start-up error stays one line). A longer one is printed to `out`: on a terminal
// one line rewritten in place (at most every 200 ms) and finished with a newline; otherwise (a
// log file, a supervisor's pipe) a structured `<prefix>: progress phase="..." done=... total=...
// rate=... eta_s=...` line every 5 s and a `... done=... seconds=...` line when the phase ends,
// so logs stay short. Describe() is the one-line state a /readyz answer shows while a phase runs.
//
// Threading: Begin/Advance/End from the loading thread; active() and Describe() from any thread
// (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>

namespace tessera::util {

class LoadProgress {
 public:
  enum class Unit { kBytes, kParameters, kItems };
  struct Options {
    std::string prefix;        // "tessera-worker"
    std::FILE* out = nullptr;  // null: nothing printed (Describe still works)
    bool terminal = false;     // `out` is a terminal: rewrite one line in place
    std::chrono::milliseconds quiet_period{1000};
    std::chrono::milliseconds terminal_interval{200};
    std::chrono::milliseconds log_interval{5000};
  };

  explicit LoadProgress(Options options) : options_(std::move(options)) {}

  // Starts a phase of `total` units (> 0); a phase still running is ended first.
  void Begin(std::string phase, int64_t total, Unit unit);
  void Advance(int64_t units);
  void End();

  bool active() const;
  // "uploading weights: 47% (1.2 of 2.6 G parameters, 350 M/s, ETA 4 s)"; "" when no phase runs.
  std::string Describe() const;

 private:
  using Clock = std::chrono::steady_clock;
  void PrintLocked(bool final);
  std::string DescribeLocked() const;

  const Options options_;
  mutable std::mutex mu_;
  bool active_ = false;
  std::string phase_;
  Unit unit_ = Unit::kItems;
  int64_t total_ = 0;
  int64_t done_ = 0;
  Clock::time_point started_;
  Clock::time_point last_print_;
  bool printed_ = false;  // this phase has printed a line
};

}  // namespace tessera::util
