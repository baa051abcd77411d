#include "tools/soak/soak_report.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/status/status.h"

namespace tessera::soak {
namespace {

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

}  // namespace

void SoakReport::Record(const SoakRequest& plan, const SoakOutcome& outcome,
                        Clock::time_point started, Clock::time_point ended) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++recorded_;
  ++by_behaviour_[static_cast<size_t>(plan.behaviour)];
  ++by_status_[CodeName(outcome.code)];
  tokens_ += outcome.tokens;
  if (ExpectedEnd(plan, outcome.code, DuringKill(started, ended))) return;
  ++unexpected_;
  if (unexpected_examples_.size() < 5) {
    unexpected_examples_.push_back(absl::StrCat(BehaviourName(plan.behaviour), " request ",
                                                plan.request.request_id().substr(0, 32), ": ",
                                                CodeName(outcome.code), " ", outcome.message));
  }
}

bool SoakReport::DuringKill(Clock::time_point started, Clock::time_point ended) const {
  for (const KillWindow& kill : kill_windows_) {
    if (kill.begin <= ended && (!kill.end.has_value() || started <= *kill.end)) return true;
  }
  return false;
}

int SoakReport::num_recorded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

void SoakReport::BeginKill(int pid) {
  std::lock_guard<std::mutex> lock(mutex_);
  killed_pids_.push_back(pid);
  kill_windows_.push_back({.begin = Clock::now(), .end = std::nullopt});
}

void SoakReport::EndKill() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!kill_windows_.empty() && !kill_windows_.back().end.has_value()) {
    kill_windows_.back().end = Clock::now();
  }
}

void SoakReport::AddRssWindow(RssWindow window) {
  std::lock_guard<std::mutex> lock(mutex_);
  rss_windows_.push_back(std::move(window));
}

std::vector<std::string> SoakReport::Failures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> failures;
  const int expected = options_.num_requests;
  if (recorded_ != expected) {
    failures.push_back(absl::StrCat(recorded_, " of ", expected, " streams ended with a status"));
  }
  if (unexpected_ > 0) {
    failures.push_back(absl::StrCat(unexpected_, " requests ended with an unexpected status"));
  }
  if (!end_.serve_alive) failures.push_back("tessera serve is not running any more");
  if (!end_.worker_connected) failures.push_back("no worker connected at the end");
  if (end_.running != 0 || end_.waiting != 0) {
    failures.push_back(absl::StrCat("left over: ", end_.running, " running, ", end_.waiting,
                                    " waiting"));
  }
  if (end_.kv_blocks_used != 0 || end_.worker_active_slots != 0) {
    failures.push_back(absl::StrCat("leaked: ", end_.kv_blocks_used, " KV blocks in use, ",
                                    end_.worker_active_slots, " worker slots live"));
  }
  if (static_cast<int>(killed_pids_.size()) != options_.kills) {
    failures.push_back(absl::StrCat(killed_pids_.size(), " of ", options_.kills,
                                    " worker kills happened"));
  }
  if (end_.restores < options_.kills) {
    failures.push_back(absl::StrCat("the router saw ", end_.restores, " worker restores after ",
                                    options_.kills, " kills"));
  }
  for (const RssWindow& window : rss_windows_) {
    if (std::optional<std::string> failed = RssWindowFailure(window, options_.rss_tolerance_mib)) {
      failures.push_back(*std::move(failed));
    }
  }
  return failures;
}

void SoakReport::PrintTallies(std::FILE* out) const {
  std::fprintf(out, "tessera-soak: %d requests (after %d warm-up) at concurrency %d in %.1f s, "
               "%lld tokens\n", recorded_, options_.warmup_requests, options_.concurrency,
               duration_s_, static_cast<long long>(tokens_));
  std::fprintf(out, "  by behaviour:");
  for (int b = 0; b < kNumBehaviours; ++b) {
    std::fprintf(out, " %s %d", BehaviourName(static_cast<Behaviour>(b)),
                 by_behaviour_[static_cast<size_t>(b)]);
  }
  std::fprintf(out, "\n  by final status:");
  for (const auto& [code, n] : by_status_) std::fprintf(out, " %s %d", code.c_str(), n);
  std::fprintf(out, "\n  unexpected ends: %d (UNAVAILABLE counts as expected only in flight at "
               "a kill)\n", unexpected_);
  for (const std::string& e : unexpected_examples_) std::fprintf(out, "    %s\n", e.c_str());
}

void SoakReport::Print(std::FILE* out) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    PrintTallies(out);
    std::fprintf(out, "  worker kills: %zu, restores seen by the router: %.0f, preemptions: %.0f\n",
                 killed_pids_.size(), end_.restores, end_.preemptions);
    std::fprintf(out, "  at the end: worker %s, %d running, %d waiting, %lld KV blocks used, "
                 "%d worker slots live\n", end_.worker_connected ? "connected" : "NOT connected",
                 end_.running, end_.waiting, static_cast<long long>(end_.kv_blocks_used),
                 end_.worker_active_slots);
    std::fprintf(out, "  RSS (flat: growth <= %.0f MiB; a window must be long enough to see "
                 "%.0f KiB/request):\n", options_.rss_tolerance_mib, kLeakToCatchKib);
    for (const RssWindow& window : rss_windows_) {
      std::fprintf(out, "    %s\n", DescribeRssWindow(window).c_str());
    }
  }
  const std::vector<std::string> failures = Failures();
  for (const std::string& f : failures) std::fprintf(out, "  FAILED: %s\n", f.c_str());
  std::fprintf(out, "%s\n", failures.empty() ? "PASS" : "FAIL");
}

}  // namespace tessera::soak
