// The request and response values that cross between tessera's HTTP server (http_server.h) and
// the routes it serves. Plain data: the server fills a Request from the wire; a route answers
// with a Response (whole) or streams through a Responder (responder.h).
//
// Threading: values; a Request is read by one route handler at a time.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::http {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // target without the query
  int version = 11;    // 10 = HTTP/1.0, 11 = HTTP/1.1
  HeaderList headers;  // in arrival order, names as sent
  std::string body;    // empty until the body was read (admission sees the head only)
  std::string peer;    // the client's IP address

  // The first header called `name` (ASCII case-insensitive), if any.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  HeaderList headers;  // extra headers (Content-Type/Length and Connection are the server's)
};

// The reason phrase of an HTTP status code ("OK", "Payload Too Large", ...).
std::string_view ReasonPhrase(int status);

}  // namespace tessera::http
