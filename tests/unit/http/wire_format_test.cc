// The response bytes: whole responses per version and keep-alive, chunk framing, and header
// values that cannot break the header section.
#include "common/http/wire_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::http {
namespace {

TEST(WireFormatTest, WholeResponsesCarryLengthAndConnection) {
  Response response{.status = 404, .content_type = "application/json", .body = "{}"};
  EXPECT_EQ(FormatResponse(response, 11, true),
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
            "\r\n{}");
  EXPECT_EQ(FormatResponse(response, 10, true),
            "HTTP/1.0 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
            "Connection: keep-alive\r\n\r\n{}");
  EXPECT_THAT(FormatResponse(response, 11, false), ::testing::HasSubstr("Connection: close\r\n"));
}

TEST(WireFormatTest, StreamsAreChunkedOnlyOnHttp11) {
  EXPECT_THAT(FormatStreamHead(200, "text/event-stream", {}, 11, true),
              ::testing::HasSubstr("Transfer-Encoding: chunked\r\n"));
  EXPECT_THAT(FormatStreamHead(200, "text/event-stream", {}, 10, true),
              ::testing::AllOf(::testing::Not(::testing::HasSubstr("chunked")),
                               ::testing::HasSubstr("Connection: close")));
  EXPECT_EQ(FrameStreamPiece("hello", 11), "5\r\nhello\r\n");
  EXPECT_EQ(FrameStreamPiece(std::string(26, 'a'), 11), "1a\r\n" + std::string(26, 'a') + "\r\n");
  EXPECT_EQ(FrameStreamPiece("", 11), "");  // an empty chunk would end the stream
  EXPECT_EQ(FrameStreamPiece("hello", 10), "hello");
  EXPECT_EQ(StreamTrailer(11), "0\r\n\r\n");
}

TEST(WireFormatTest, HeaderValuesCannotSplitTheHeaderSection) {
  Response response{.headers = {{"X-Evil", "a\r\nSet-Cookie: b"}}};
  EXPECT_THAT(FormatResponse(response, 11, true), ::testing::HasSubstr("X-Evil: a  Set-Cookie: b\r\n"));
}

}  // namespace
}  // namespace tessera::http
