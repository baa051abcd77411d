#include "tools/soak/soak_options.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::soak {
namespace {

std::string NextToSelf(const std::string& name) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? name : (self.parent_path() / name).string();
}

absl::Status CheckFraction(const char* name, double value) {
  if (value >= 0 && value <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " = ", value, ", must be in [0, 1]"));
}

void AddOptions(CLI::App& app, SoakOptions& o) {
  app.add_option("--requests", o.num_requests, "measured requests")->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "streams at once")->capture_default_str();
  app.add_option("--warmup", o.warmup_requests, "plain requests before the RSS baseline "
                 "(-1: 2 x concurrency)")->capture_default_str();
  app.add_option("--max-tokens", o.max_tokens, "each request asks for 1..N tokens")
      ->capture_default_str();
  app.add_option("--cancel", o.cancel_fraction, "fraction cancelled mid-stream")
      ->capture_default_str();
  app.add_option("--slow", o.slow_fraction, "fraction read slowly")->capture_default_str();
  app.add_option("--malformed", o.malformed_fraction, "fraction malformed")
      ->capture_default_str();
  app.add_option("--slow-delay-ms", o.slow_read_delay_ms,
                 "a slow reader's pause per response (and an HTTP slow sender's per piece)")
      ->capture_default_str();
  app.add_option("--http-slow-readers", o.http_slow_reader_fraction,
                 "fraction of HTTP streams read slowly, half of them abandoned unread")
      ->capture_default_str();
  app.add_option("--http-disconnects", o.http_disconnect_fraction,
                 "fraction of HTTP requests whose client leaves after 0..300 ms")
      ->capture_default_str();
  app.add_option("--http-slow-senders", o.http_slow_sender_fraction,
                 "fraction of HTTP requests sent in pieces, a quarter stalling in the head")
      ->capture_default_str();
  app.add_option("--http-stall-ms", o.http_stall_ms,
                 "how long a stalled HTTP reader holds its connection before it leaves")
      ->capture_default_str();
  app.add_option("--kills", o.kills, "kill -9 of the worker during the run")
      ->capture_default_str();
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_option("--request-timeout", o.request_timeout_s, "client deadline per request (s)")
      ->capture_default_str();
  app.add_option("--rss-tolerance-mib", o.rss_tolerance_mib,
                 "the most a process's RSS may grow over its window (each must also be long "
                 "enough to see a 100 KiB/request leak)")->capture_default_str();
  app.add_option("--tessera", o.tessera_path, "the tessera binary (default: next to this one)");
  app.add_option("serve_args", o.serve_args, "arguments of `tessera serve` (after --)");
}

absl::Status Validate(const SoakOptions& o) {
  if (o.num_requests < 1 || o.concurrency < 1 || o.max_tokens < 1 || o.kills < 0 ||
      o.http_stall_ms < 0 || o.slow_read_delay_ms < 0) {
    return absl::InvalidArgumentError(
        "--requests, --concurrency and --max-tokens must be >= 1, --kills, --http-stall-ms "
        "and --slow-delay-ms >= 0");
  }
  const double http = o.http_slow_reader_fraction + o.http_disconnect_fraction +
                      o.http_slow_sender_fraction;
  for (const auto& [name, value] :
       {std::pair{"--cancel", o.cancel_fraction}, std::pair{"--slow", o.slow_fraction},
        std::pair{"--malformed", o.malformed_fraction},
        std::pair{"--http-slow-readers", o.http_slow_reader_fraction},
        std::pair{"--http-disconnects", o.http_disconnect_fraction},
        std::pair{"--http-slow-senders", o.http_slow_sender_fraction},
        std::pair{"the sum of the behaviour fractions",
                  o.cancel_fraction + o.slow_fraction + o.malformed_fraction + http}}) {
    if (absl::Status s = CheckFraction(name, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SoakOptions> ParseSoakOptions(int argc, char** argv) {
  SoakOptions o;
  CLI::App app{
      "tessera-soak: starts `tessera serve <args after -->`, runs requests over the gRPC API "
      "with cancels, slow readers, malformed requests and worker kills (and hostile clients of "
      "the OpenAI HTTP door), then checks that nothing is left running, every KV block is "
      "free, every stream ended with a status and RSS stayed flat. Exit 0 when every check "
      "passed."};
  AddOptions(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return absl::CancelledError("help");
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (o.tessera_path.empty()) o.tessera_path = NextToSelf("tessera");
  if (o.warmup_requests < 0) o.warmup_requests = 2 * o.concurrency;
  if (absl::Status s = Validate(o); !s.ok()) return s;
  return o;
}

}  // namespace tessera::soak
