// A minimal blocking HTTP/1.0 GET, for one process reading another's small text endpoint on the
// same host (the router reading a worker's /metrics). Plain HTTP only; the whole exchange is
// bounded by `timeout` (connect, send, receive) and the response by `max_bytes`.
//
// Threading: any thread; blocks it for at most `timeout`.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::http {

// The body of a 200 answer to `GET path` from HOST:PORT ([IPv6]:PORT too). UNAVAILABLE when the
// server cannot be reached or does not answer in time; INTERNAL for another status or a response
// that is malformed or larger than max_bytes.
absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    absl::Duration timeout, size_t max_bytes);

}  // namespace tessera::http
