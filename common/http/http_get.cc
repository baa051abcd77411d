#include "common/http/http_get.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera::http {
namespace {

// Closes the descriptor when it goes out of scope.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) close(fd);
  }
};

int MillisLeft(absl::Time deadline) {
  return static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

// Waits for `events` on fd until the deadline; false on timeout or error.
bool Await(int fd, short events, absl::Time deadline) {
  pollfd p{.fd = fd, .events = events, .revents = 0};
  int ready;
  do {
    ready = poll(&p, 1, MillisLeft(deadline));
  } while (ready < 0 && errno == EINTR);
  return ready == 1;
}

absl::Status Connect(const std::string& host_port, absl::Time deadline, Socket* socket) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("address needs HOST:PORT");
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), host_port.substr(colon + 1).c_str(), &hints, &found) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host_port));
  }
  socket->fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = socket->fd < 0 ? -1 : connect(socket->fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (rc != 0 && (socket->fd < 0 || errno != EINPROGRESS || !Await(socket->fd, POLLOUT, deadline))) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port));
  }
  int error = 0;
  socklen_t length = sizeof(error);
  getsockopt(socket->fd, SOL_SOCKET, SO_ERROR, &error, &length);
  if (error != 0) return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port));
  return absl::OkStatus();
}

absl::Status SendAll(int fd, const std::string& bytes, absl::Time deadline) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return absl::UnavailableError("the connection closed while sending");
    } else if (!Await(fd, POLLOUT, deadline)) {
      return absl::UnavailableError("timed out sending the request");
    }
  }
  return absl::OkStatus();
}

// Everything until the server closes (HTTP/1.0), within the deadline and max_bytes.
absl::StatusOr<std::string> ReceiveAll(int fd, absl::Time deadline, size_t max_bytes) {
  std::string response;
  char buffer[16384];
  for (;;) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) return response;
    if (n > 0) {
      response.append(buffer, static_cast<size_t>(n));
      if (response.size() > max_bytes) return absl::InternalError("the response is too large");
    } else if (errno != EAGAIN && errno != EINTR) {
      return absl::UnavailableError("the connection failed while receiving");
    } else if (!Await(fd, POLLIN, deadline)) {
      return absl::UnavailableError("timed out waiting for the response");
    }
  }
}

}  // namespace

absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    absl::Duration timeout, size_t max_bytes) {
  const absl::Time deadline = absl::Now() + timeout;
  Socket socket;
  if (absl::Status s = Connect(host_port, deadline, &socket); !s.ok()) return s;
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port,
                                           "\r\nConnection: close\r\n\r\n");
  if (absl::Status s = SendAll(socket.fd, request, deadline); !s.ok()) return s;
  absl::StatusOr<std::string> response = ReceiveAll(socket.fd, deadline, max_bytes);
  if (!response.ok()) return response.status();
  const size_t head_end = response->find("\r\n\r\n");
  if (head_end == std::string::npos || !absl::StartsWith(*response, "HTTP/1.")) {
    return absl::InternalError(absl::StrCat("GET ", path, " from ", host_port, ": malformed response"));
  }
  const size_t space = response->find(' ');
  if (space == std::string::npos || response->compare(space + 1, 4, "200 ") != 0) {
    return absl::InternalError(absl::StrCat("GET ", path, " from ", host_port, ": ",
                                            response->substr(0, response->find("\r\n"))));
  }
  return response->substr(head_end + 4);
}

}  // namespace tessera::http
