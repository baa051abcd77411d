// tessera-soak's options: the load (requests, concurrency, the mix of client behaviours), the
// chaos (worker kills) and the pass/fail tolerances. Plain data filled from the command line by
// ParseSoakOptions; read-only afterwards (every thread may read it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::soak {

struct SoakOptions {
  int num_requests = 300;     // measured requests (after the warm-up)
  int concurrency = 16;       // client threads, one stream each at a time
  int warmup_requests = -1;   // plain requests before the RSS baseline; -1 = 2 x concurrency
  int max_tokens = 8;         // each request asks for 1..max_tokens tokens
  double cancel_fraction = 0.2;     // cancelled by the client after a random number of tokens
  double slow_fraction = 0.1;       // read with a pause before every response
  double malformed_fraction = 0.02;  // bytes that do not parse, or fields over their limits
  // The HTTP door (http_door.h): requests over the OpenAI HTTP API by hostile clients.
  double http_slow_reader_fraction = 0;  // read slowly in small pieces, or stop reading
  double http_disconnect_fraction = 0;   // leave mid-request (streaming or not)
  double http_slow_sender_fraction = 0;  // trickle the request, or stall in its head
  int http_stall_ms = 2000;         // how long a stalled HTTP reader holds its connection
  int slow_read_delay_ms = 100;     // the slow readers' pause (and the slow senders')
  int kills = 0;              // kill -9 of the worker, evenly spread over the measured requests
  uint32_t seed = 1;
  double request_timeout_s = 300;   // client deadline of each request (a hang shows as a failure)
  // RSS is flat when a window grows at most this much (rss_window.h): 10 MiB is 2.5x the noise
  // seen in a clean short run, and lets a window of 103+ requests see a 100 KiB/request leak.
  double rss_tolerance_mib = 10;
  std::string tessera_path;   // the `tessera` binary; default: next to tessera-soak
  std::vector<std::string> serve_args;  // passed to `tessera serve` (after --)
};

// INVALID_ARGUMENT naming the option for values out of range; the CLI11 help text on --help is
// printed and returned as CANCELLED (exit 0).
absl::StatusOr<SoakOptions> ParseSoakOptions(int argc, char** argv);

}  // namespace tessera::soak
