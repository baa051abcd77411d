#include "router/router_log.h"

#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "absl/status/status.h"

namespace tessera::router {

std::shared_ptr<spdlog::logger> MakeStderrLogger(spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>(
      "tessera-router", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%eZ level=%l component=%n %v",
                      spdlog::pattern_time_type::utc);
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);  // stderr lines must not wait in a buffer
  return logger;
}

std::shared_ptr<spdlog::logger> MakeNullLogger() {
  return std::make_shared<spdlog::logger>("null", std::make_shared<spdlog::sinks::null_sink_mt>());
}

absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(const std::string& name) {
  if (name == "debug") return spdlog::level::debug;
  if (name == "info") return spdlog::level::info;
  if (name == "warn") return spdlog::level::warn;
  if (name == "error") return spdlog::level::err;
  if (name == "off") return spdlog::level::off;
  return absl::InvalidArgumentError("--log-level must be one of debug, info, warn, error, off; got '" +
                                    name + "'");
}

std::string LogValue(std::string_view value) {
  if (!value.empty() && value.find_first_of(" \"=\n") == std::string_view::npos) {
    return std::string(value);
  }
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c == '\n' ? ' ' : c);
  }
  out.push_back('"');
  return out;
}

}  // namespace tessera::router
