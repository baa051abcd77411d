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

void SoakReport::Record(const SoakRequest& plan, const SoakOutcome& outcome) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++recorded_;
  ++by_behaviour_[static_cast<size_t>(plan.behaviour)];
  ++by_status_[CodeName(outcome.code)];
  tokens_ += outcome.tokens;
  if (ExpectedEnd(plan, outcome.code)) return;
  ++unexpected_;
  if (unexpected_examples_.size() < 5) {
    unexpected_examples_.push_back(absl::StrCat(BehaviourName(plan.behaviour), " request ",
                                                plan.request.request_id().substr(0, 32), ": ",
                                                CodeName(outcome.code), " ", outcome.message));
  }
}

int SoakReport::num_recorded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

bool SoakReport::RssFlat(double before, double after) const {
  if (before < 0 || after < 0) return false;
  const double allowed =
      std::max(options_.rss_tolerance_mib, before * options_.rss_tolerance_pct / 100.0);
  return after - before <= allowed;
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
  if (!RssFlat(rss_before_.router_mib, rss_after_.router_mib)) {
    failures.push_back(absl::StrCat("router RSS grew: ", rss_before_.router_mib, " -> ",
                                    rss_after_.router_mib, " MiB"));
  }
  if (!RssFlat(rss_before_.worker_mib, rss_after_.worker_mib)) {
    failures.push_back(absl::StrCat("worker RSS grew: ", rss_before_.worker_mib, " -> ",
                                    rss_after_.worker_mib, " MiB"));
  }
  return failures;
}

void SoakReport::Print(std::FILE* out) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
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
    std::fprintf(out, "\n  unexpected ends: %d\n", unexpected_);
    for (const std::string& e : unexpected_examples_) std::fprintf(out, "    %s\n", e.c_str());
    std::fprintf(out, "  worker kills: %zu, restores seen by the router: %.0f, preemptions: %.0f\n",
                 killed_pids_.size(), end_.restores, end_.preemptions);
    std::fprintf(out, "  at the end: worker %s, %d running, %d waiting, %lld KV blocks used, "
                 "%d worker slots live\n", end_.worker_connected ? "connected" : "NOT connected",
                 end_.running, end_.waiting, static_cast<long long>(end_.kv_blocks_used),
                 end_.worker_active_slots);
    std::fprintf(out, "  RSS router: %.1f -> %.1f MiB, worker: %.1f -> %.1f MiB "
                 "(flat: growth <= max(%.0f MiB, %.0f%%))\n", rss_before_.router_mib,
                 rss_after_.router_mib, rss_before_.worker_mib, rss_after_.worker_mib,
                 options_.rss_tolerance_mib, options_.rss_tolerance_pct);
  }
  const std::vector<std::string> failures = Failures();
  for (const std::string& f : failures) std::fprintf(out, "  FAILED: %s\n", f.c_str());
  std::fprintf(out, "%s\n", failures.empty() ? "PASS" : "FAIL");
}

}  // namespace tessera::soak
