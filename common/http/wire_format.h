// Bytes on the wire for HTTP/1.x responses: the status line and header section, whole bodies,
// and the framing of streamed bodies (chunked for HTTP/1.1; raw until close for HTTP/1.0, which
// has no chunked encoding).
//
// Threading: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/http/http_message.h"

namespace tessera::http {

// A whole response: status line, Content-Type, Content-Length, Connection, extra headers, body.
std::string FormatResponse(const Response& response, int version, bool keep_alive);

// The head of a streamed response. HTTP/1.1 streams chunked (and may keep the connection); an
// HTTP/1.0 stream has no length, so it always ends by closing the connection.
std::string FormatStreamHead(int status, std::string_view content_type, const HeaderList& headers,
                             int version, bool keep_alive);
// One piece of a streamed body in the version's framing ("" for an empty piece).
std::string FrameStreamPiece(std::string_view data, int version);
// What ends a streamed body ("0\r\n\r\n" for chunked; nothing for HTTP/1.0).
std::string_view StreamTrailer(int version);

}  // namespace tessera::http
