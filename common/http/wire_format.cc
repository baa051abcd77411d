#include "common/http/wire_format.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/util/absl_compat.h"

namespace tessera::http {
namespace {

std::string StatusLine(int status, int version) {
  return absl::StrCat(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ", status, " ",
                      util::ToAbsl(ReasonPhrase(status)), "\r\n");
}

// Header values from routes never carry a line break into the header section.
std::string HeaderLine(std::string_view name, std::string_view value) {
  std::string line = absl::StrCat(util::ToAbsl(name), ": ", util::ToAbsl(value));
  for (char& c : line) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return absl::StrCat(line, "\r\n");
}

std::string ConnectionLine(int version, bool keep_alive) {
  if (!keep_alive) return HeaderLine("Connection", "close");
  // HTTP/1.1 keeps connections by default; HTTP/1.0 only when both sides say so.
  return version == 10 ? HeaderLine("Connection", "keep-alive") : "";
}

std::string ExtraHeaders(const HeaderList& headers) {
  std::string out;
  for (const auto& [name, value] : headers) out += HeaderLine(name, value);
  return out;
}

}  // namespace

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

std::string FormatResponse(const Response& response, int version, bool keep_alive) {
  return absl::StrCat(StatusLine(response.status, version),
                      HeaderLine("Content-Type", response.content_type),
                      HeaderLine("Content-Length", absl::StrCat(response.body.size())),
                      ConnectionLine(version, keep_alive), ExtraHeaders(response.headers), "\r\n",
                      response.body);
}

std::string FormatStreamHead(int status, std::string_view content_type, const HeaderList& headers,
                             int version, bool keep_alive) {
  const bool chunked = version != 10;
  return absl::StrCat(StatusLine(status, version), HeaderLine("Content-Type", content_type),
                      chunked ? HeaderLine("Transfer-Encoding", "chunked") : "",
                      ConnectionLine(version, chunked && keep_alive), ExtraHeaders(headers),
                      "\r\n");
}

std::string FrameStreamPiece(std::string_view data, int version) {
  if (data.empty()) return "";
  if (version == 10) return std::string(data);
  return absl::StrCat(absl::StrFormat("%x", data.size()), "\r\n", util::ToAbsl(data), "\r\n");
}

std::string_view StreamTrailer(int version) { return version == 10 ? "" : "0\r\n\r\n"; }

}  // namespace tessera::http
