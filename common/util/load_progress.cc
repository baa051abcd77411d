#include "common/util/load_progress.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::util {
namespace {

// An amount in the unit's own scale: "1.21 GiB", "1.2 G parameters", "12 graphs".
std::string Amount(double n, LoadProgress::Unit unit) {
  switch (unit) {
    case LoadProgress::Unit::kBytes:
      if (n >= (1 << 30)) return absl::StrFormat("%.2f GiB", n / (1 << 30));
      return absl::StrFormat("%.1f MiB", n / (1 << 20));
    case LoadProgress::Unit::kParameters:
      if (n >= 1e9) return absl::StrFormat("%.2f G parameters", n / 1e9);
      return absl::StrFormat("%.1f M parameters", n / 1e6);
    case LoadProgress::Unit::kItems:
      return absl::StrFormat("%.0f", n);
  }
  return "";
}

std::string Rate(double per_second, LoadProgress::Unit unit) {
  switch (unit) {
    case LoadProgress::Unit::kBytes:
      return absl::StrFormat("%.0f MiB/s", per_second / (1 << 20));
    case LoadProgress::Unit::kParameters:
      return absl::StrFormat("%.0f M/s", per_second / 1e6);
    case LoadProgress::Unit::kItems:
      return absl::StrFormat("%.1f/s", per_second);
  }
  return "";
}

}  // namespace

void LoadProgress::Begin(std::string phase, int64_t total, Unit unit) {
  End();
  std::lock_guard<std::mutex> lock(mu_);
  active_ = true;
  phase_ = std::move(phase);
  unit_ = unit;
  total_ = std::max<int64_t>(total, 1);
  done_ = 0;
  started_ = last_print_ = Clock::now();
  printed_ = false;
}

void LoadProgress::Advance(int64_t units) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_) return;
  done_ = std::min(total_, done_ + units);
  const auto now = Clock::now();
  const auto interval = options_.terminal ? options_.terminal_interval : options_.log_interval;
  if (printed_ ? now - last_print_ >= interval : now - started_ >= options_.quiet_period) {
    PrintLocked(/*final=*/false);
  }
}

void LoadProgress::End() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_) return;
  done_ = total_;
  if (printed_) PrintLocked(/*final=*/true);
  active_ = false;
}

bool LoadProgress::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

std::string LoadProgress::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_ ? DescribeLocked() : "";
}

std::string LoadProgress::DescribeLocked() const {
  const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  const double rate = seconds > 0 ? done_ / seconds : 0;
  std::string out = absl::StrFormat("%s: %.0f%% (%s of %s", phase_, 100.0 * done_ / total_,
                                    Amount(done_, unit_), Amount(total_, unit_));
  if (rate > 0) {
    absl::StrAppend(&out, ", ", Rate(rate, unit_),
                    absl::StrFormat(", ETA %.0f s", (total_ - done_) / rate));
  }
  return out + ")";
}

void LoadProgress::PrintLocked(bool final) {
  last_print_ = Clock::now();
  printed_ = true;
  if (options_.out == nullptr) return;
  const double seconds = std::chrono::duration<double>(last_print_ - started_).count();
  if (options_.terminal) {
    const std::string line = final ? absl::StrFormat("%s: %s: done, %s in %.1f s", options_.prefix,
                                                     phase_, Amount(total_, unit_), seconds)
                                   : absl::StrCat(options_.prefix, ": ", DescribeLocked());
    std::fprintf(options_.out, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
  } else if (final) {
    std::fprintf(options_.out, "%s: progress phase=\"%s\" done=%lld seconds=%.1f rate=\"%s\"\n",
                 options_.prefix.c_str(), phase_.c_str(), static_cast<long long>(total_), seconds,
                 Rate(seconds > 0 ? total_ / seconds : 0, unit_).c_str());
  } else {
    const double rate = seconds > 0 ? done_ / seconds : 0;
    std::fprintf(options_.out,
                 "%s: progress phase=\"%s\" done=%lld total=%lld percent=%.0f rate=\"%s\" "
                 "eta_s=%.0f\n",
                 options_.prefix.c_str(), phase_.c_str(), static_cast<long long>(done_),
                 static_cast<long long>(total_), 100.0 * done_ / total_,
                 Rate(rate, unit_).c_str(), rate > 0 ? (total_ - done_) / rate : -1.0);
  }
  std::fflush(options_.out);
}

}  // namespace tessera::util
