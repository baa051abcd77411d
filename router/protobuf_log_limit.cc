#include "router/protobuf_log_limit.h"

#include <cstdio>
#include <mutex>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "absl/time/clock.h"

namespace tessera::router {
namespace {

// protobuf's LogHandler is a plain function pointer, so the limiter's state cannot be passed in:
// it lives here, process-wide like the handler itself.
struct LimiterState {
  std::mutex mutex;
  absl::Duration interval = absl::Seconds(10);
  absl::Time last_printed = absl::InfinitePast();
  long dropped = 0;
};

LimiterState& State() {
  static LimiterState* state = new LimiterState();
  return *state;
}

bool PrintLimited(const char* level, const char* filename, int line, const std::string& message,
                  bool always) {
  LimiterState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  const absl::Time now = absl::Now();
  if (!always && now - state.last_printed < state.interval) {
    ++state.dropped;
    return false;
  }
  std::fprintf(stderr, "[libprotobuf %s %s:%d] %s", level, filename, line, message.c_str());
  if (state.dropped > 0) {
    std::fprintf(stderr, " (%ld similar lines dropped in the last %s)", state.dropped,
                 absl::FormatDuration(now - state.last_printed).c_str());
  }
  std::fputc('\n', stderr);
  state.last_printed = now;
  state.dropped = 0;
  return true;
}

void Handler(google::protobuf::LogLevel level, const char* filename, int line,
             const std::string& message) {
  static const char* const kNames[] = {"INFO", "WARNING", "ERROR", "FATAL"};
  const int index = static_cast<int>(level);
  const char* name = index >= 0 && index < 4 ? kNames[index] : "?";
  PrintLimited(name, filename, line, message, level == google::protobuf::LOGLEVEL_FATAL);
}

}  // namespace

void InstallProtobufLogLimit(absl::Duration interval) {
  {
    std::lock_guard<std::mutex> lock(State().mutex);
    State().interval = interval;
  }
  google::protobuf::SetLogHandler(&Handler);
}

bool OfferProtobufLogLine(const char* message) {
  return PrintLimited("ERROR", "test", 0, message, /*always=*/false);
}

}  // namespace tessera::router
