// Test helper: a strict-enough parser of the Prometheus text exposition format (0.0.4) and a
// small HTTP GET, shared by the metrics tests.
#pragma once

#include <map>
#include <regex>
#include <sstream>
#include <string>

#include <httplib.h>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::metrics::testing {

// Every sample line as "name{labels}" (exactly as written) -> value. INVALID_ARGUMENT names the
// first line that is neither "# HELP name ...", "# TYPE name <type>", blank, nor a sample.
inline absl::StatusOr<std::map<std::string, double>> ParseExposition(const std::string& text) {
  static const std::regex kHelp(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*)");
  static const std::regex kType(
      R"(# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped))");
  static const std::regex kSample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})?) (\S+))");
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty() || std::regex_match(line, kHelp) || std::regex_match(line, kType)) continue;
    std::smatch match;
    double value = 0;
    const bool ok = std::regex_match(line, match, kSample);
    const std::string value_text = ok ? match[5].str() : "";
    if (!ok || !(absl::SimpleAtod(value_text, &value) || value_text == "+Inf" ||
                 value_text == "-Inf" || value_text == "NaN")) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, ": '", line, "'"));
    }
    samples[match[1].str()] = value;
  }
  return samples;
}

// GET http://host:port`path`; the response or an error.
inline httplib::Result Get(const std::string& host, int port, const std::string& path) {
  httplib::Client client(host, port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  return client.Get(path);
}

}  // namespace tessera::metrics::testing
