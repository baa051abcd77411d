// BusyWindow: device time over wall time in a sliding window (DESIGN.md §5's GPU-busy ratio).
// Each step adds its device seconds at the moment it ended; Ratio(now) sums the steps that ended
// within the last `window` and divides by the window, so an idle device decays to 0 once its
// last step leaves the window. A step longer than the window counts whole (the ratio is capped
// at 1). Not thread-safe; the owner serialises (WorkerMetrics: step thread + its ticker).
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <utility>

namespace tessera::worker {

class BusyWindow {
 public:
  using Clock = std::chrono::steady_clock;

  explicit BusyWindow(Clock::duration window) : window_(window) {}

  void Add(Clock::time_point step_end, double device_seconds) {
    steps_.emplace_back(step_end, device_seconds);
    busy_seconds_ += device_seconds;
  }

  double Ratio(Clock::time_point now) {
    while (!steps_.empty() && steps_.front().first < now - window_) {
      busy_seconds_ -= steps_.front().second;
      steps_.pop_front();
    }
    if (steps_.empty()) busy_seconds_ = 0;  // no drift from repeated float subtraction
    const double wall = std::chrono::duration<double>(window_).count();
    return std::clamp(busy_seconds_ / wall, 0.0, 1.0);
  }

 private:
  Clock::duration window_;
  std::deque<std::pair<Clock::time_point, double>> steps_;
  double busy_seconds_ = 0;
};

}  // namespace tessera::worker
