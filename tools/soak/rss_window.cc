#include "tools/soak/rss_window.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::soak {

std::optional<std::string> RssWindowFailure(const RssWindow& w, double tolerance_mib) {
  if (w.start_mib < 0 || w.end_mib < 0) {
    return absl::StrCat(w.who, " (pid ", w.pid, "): RSS unreadable");
  }
  if (w.end_mib - w.start_mib > tolerance_mib) {
    return absl::StrFormat("%s RSS grew by more than %.0f MiB: %s", w.who, tolerance_mib,
                           DescribeRssWindow(w));
  }
  const double visible_leak_mib = w.requests * kLeakToCatchKib / 1024;
  if (visible_leak_mib <= tolerance_mib) {
    return absl::StrFormat(
        "%s: %d requests are too few to see a leak of %.0f KiB/request (%.1f MiB) within the "
        "%.0f MiB tolerance: run more --requests or fewer --kills",
        w.who, w.requests, kLeakToCatchKib, visible_leak_mib, tolerance_mib);
  }
  return std::nullopt;
}

std::string DescribeRssWindow(const RssWindow& w) {
  const double per_request_kib =
      w.requests > 0 ? (w.end_mib - w.start_mib) * 1024 / w.requests : 0;
  return absl::StrFormat("%s (pid %d): %.1f -> %.1f MiB over %d requests (%+.1f KiB/request)",
                         w.who, w.pid, w.start_mib, w.end_mib, w.requests, per_request_kib);
}

}  // namespace tessera::soak
