#include "tools/soak/http_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tessera::soak {
namespace {

// The connected socket of `host`:`port`, or -1.
int ConnectTo(const std::string& host, const std::string& port, int receive_buffer_bytes) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (receive_buffer_bytes > 0) {
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof(receive_buffer_bytes));
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

}  // namespace

absl::StatusOr<HttpConnection> HttpConnection::Connect(const std::string& host_port,
                                                       int receive_buffer_bytes) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("not HOST:PORT: ", host_port));
  }
  std::string host = host_port.substr(0, colon);
  host = std::string(absl::StripSuffix(absl::StripPrefix(host, "["), "]"));
  const int fd = ConnectTo(host, host_port.substr(colon + 1), receive_buffer_bytes);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port));
  return HttpConnection(fd);
}

HttpConnection::HttpConnection(HttpConnection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

HttpConnection& HttpConnection::operator=(HttpConnection&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

HttpConnection::~HttpConnection() { Close(); }

void HttpConnection::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool HttpConnection::SendAll(std::string_view bytes) {
  while (!bytes.empty() && fd_ >= 0) {
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return fd_ >= 0;
}

HttpConnection::Received HttpConnection::ReceiveSome(std::string* out, size_t max_bytes,
                                                     absl::Duration timeout) {
  if (fd_ < 0) return Received::kError;
  pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
  const int ms = static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout)));
  const int ready = poll(&p, 1, ms);
  if (ready == 0) return Received::kTimeout;
  if (ready < 0) return errno == EINTR ? Received::kTimeout : Received::kError;
  char buffer[65536];
  const ssize_t n = recv(fd_, buffer, std::min(max_bytes, sizeof(buffer)), 0);
  if (n == 0) return Received::kEof;
  if (n < 0) return errno == EINTR || errno == EAGAIN ? Received::kTimeout : Received::kError;
  out->append(buffer, static_cast<size_t>(n));
  return Received::kData;
}

HttpConnection::Received HttpConnection::ReceiveAll(std::string* out, absl::Time deadline,
                                                    absl::Duration pause, size_t piece) {
  while (true) {
    if (pause > absl::ZeroDuration()) std::this_thread::sleep_for(absl::ToChronoNanoseconds(pause));
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return Received::kTimeout;
    const Received r = ReceiveSome(out, piece, left);
    if (r != Received::kData) return r;
  }
}

std::string PostHead(const std::string& path, size_t body_bytes) {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: localhost\r\n",
                      "Content-Type: application/json\r\nContent-Length: ", body_bytes,
                      "\r\nConnection: close\r\n\r\n");
}

int HttpStatusOf(const std::string& response) {
  if (response.size() < 12 || response.compare(0, 7, "HTTP/1.") != 0) return -1;
  int status = -1;
  return absl::SimpleAtoi(absl::string_view(response).substr(9, 3), &status) ? status : -1;
}

}  // namespace tessera::soak
