// One client TCP connection to the OpenAI HTTP door, as the soak's hostile HTTP clients use it:
// connect (optionally with a small receive buffer, so a slow reader's backlog stays in the
// server), send whole or in pieces, receive with a deadline, close at any moment. Blocking POSIX
// sockets; no HTTP parsing beyond the status line (the door's answers are checked by substring).
//
// Ownership/threading: move-only; one thread uses one connection. The destructor closes it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::soak {

class HttpConnection {
 public:
  // Connects to HOST:PORT (IPv4 or [IPv6]); receive_buffer_bytes > 0 sets SO_RCVBUF first.
  static absl::StatusOr<HttpConnection> Connect(const std::string& host_port,
                                                int receive_buffer_bytes = 0);
  HttpConnection(HttpConnection&& other) noexcept;
  HttpConnection& operator=(HttpConnection&& other) noexcept;
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;
  ~HttpConnection();

  // False when the server closed or reset the connection.
  bool SendAll(std::string_view bytes);

  enum class Received { kData, kEof, kTimeout, kError };
  // Appends up to max_bytes that arrive within `timeout` to *out.
  Received ReceiveSome(std::string* out, size_t max_bytes, absl::Duration timeout);
  // Receives until EOF, an error or `deadline`, pausing `pause` before each read of at most
  // `piece` bytes (a slow reader); the last ReceiveSome result.
  Received ReceiveAll(std::string* out, absl::Time deadline, absl::Duration pause = {},
                      size_t piece = 65536);
  // Closes at once (the server sees EOF, or a reset when data is unread).
  void Close();

 private:
  explicit HttpConnection(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// "POST <path> HTTP/1.1" with Host, Content-Type: application/json, Content-Length and
// Connection: close, ending with the blank line.
std::string PostHead(const std::string& path, size_t body_bytes);
// The status code of a response that starts "HTTP/1.x NNN"; -1 when it does not.
int HttpStatusOf(const std::string& response);

}  // namespace tessera::soak
