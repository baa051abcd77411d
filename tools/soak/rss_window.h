// RSS over one window of the soak: one process (the router for the whole run, or one life of the
// worker, from its baseline to just before it is killed, or to the end), read from the live
// process at both ends. Flat means it grew at most `tolerance_mib`, and a window is only trusted
// when it could see a leak of kLeakToCatchKib per request: requests x 100 KiB must exceed the
// tolerance, or the window is reported as too short to tell (a failure, not a silent pass).
//
// Threading: plain values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>

namespace tessera::soak {

inline constexpr double kLeakToCatchKib = 100;

struct RssWindow {
  std::string who;   // "router", "worker life 1", ...
  pid_t pid = -1;
  double start_mib = -1;
  double end_mib = -1;
  int requests = 0;  // measured requests that ended inside the window
};

// Why the window fails (grew, unreadable, or too short to see a 100 KiB/request leak); nullopt
// when it is flat and long enough.
std::optional<std::string> RssWindowFailure(const RssWindow& window, double tolerance_mib);

// "worker life 1 (pid 123): 350.1 -> 352.0 MiB over 140 requests (+13.9 KiB/request)".
std::string DescribeRssWindow(const RssWindow& window);

}  // namespace tessera::soak
