// The router's operational log (issue 15, item 5): one structured line per event on stderr, in
// logfmt (`ts=... level=warn component=tessera-router event=worker_lost key=value ...`), through
// spdlog with levels. Events: worker_connected / worker_lost / worker_unusable, drain_begin /
// drain_end, request_rejected (rate-limited), preemption_storm.
//
// Threading: spdlog loggers are thread-safe (the _mt sink). The logger is made in main() and
// passed in (EngineConfig::log); libraries never create one themselves.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "absl/status/statusor.h"

namespace tessera::router {

// A logger writing logfmt lines to stderr at `level` and above.
std::shared_ptr<spdlog::logger> MakeStderrLogger(spdlog::level::level_enum level);
// A logger that drops everything (tests, embedders that pass none).
std::shared_ptr<spdlog::logger> MakeNullLogger();
// "debug", "info", "warn", "error", "off"; INVALID_ARGUMENT naming the accepted ones otherwise.
absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(const std::string& name);
// Quotes a value for logfmt when it holds spaces, quotes or '=' (messages, statuses).
std::string LogValue(std::string_view value);

}  // namespace tessera::router
