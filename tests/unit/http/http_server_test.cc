// HttpServer's serving behavior over real loopback sockets: keep-alive and pipelined requests
// answered in order, HTTP/1.0 answered as HTTP/1.0, streamed (chunked) answers, a pool route that
// sees its client leave, routes that forget to answer, and Stop with a route still running.
#include "common/http/http_server.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/http/raw_client.h"
#include "tests/unit/http/test_server.h"

namespace tessera::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::Eventually;
using testing::RawClient;
using testing::StartOrDie;
using testing::Text;
using namespace std::chrono_literals;

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(HttpServerTest, KeepAliveAndPipelinedRequestsAreAnsweredInOrder) {
  auto server = StartOrDie({}, {Text("GET", "/a", "first"), Text("GET", "/b", "second"),
                                testing::EchoSize("/echo")});
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                          "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                          "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string got = client.Read(5s, "second");
  const size_t first = got.find("first"), echo = got.find("\r\n\r\n5"),
               second = got.find("second");
  ASSERT_NE(first, std::string::npos) << got;
  ASSERT_NE(echo, std::string::npos) << got;
  ASSERT_NE(second, std::string::npos) << got;
  EXPECT_LT(first, echo);
  EXPECT_LT(echo, second);
  EXPECT_EQ(Count(got, "HTTP/1.1 200 OK"), 3) << got;
  EXPECT_FALSE(client.closed_by_server());
}

TEST(HttpServerTest, AnHttp10RequestGetsAnHttp10AnswerAndTheConnectionCloses) {
  auto server = StartOrDie({}, {Text("GET", "/health", "ok")});
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /health HTTP/1.0\r\n\r\n"));
  const std::string got = client.Read(5s);
  EXPECT_THAT(got, StartsWith("HTTP/1.0 200 OK\r\n"));
  EXPECT_THAT(got, HasSubstr("Connection: close"));
  EXPECT_TRUE(client.closed_by_server());
}

Route Streaming(std::string path, int pieces) {
  return Route{.method = "GET",
               .path = std::move(path),
               .execution = Execution::kPool,
               .handle = [pieces](const Request&, Responder& responder) {
                 ASSERT_TRUE(responder.Begin(200, "text/event-stream", {{"Cache-Control", "no-cache"}}));
                 for (int i = 0; i < pieces; ++i) {
                   ASSERT_TRUE(responder.Write("data: " + std::to_string(i) + "\n\n"));
                 }
                 responder.End();
               }};
}

TEST(HttpServerTest, AStreamIsChunkedOnHttp11AndRawUntilCloseOnHttp10) {
  auto server = StartOrDie({}, {Streaming("/s", 3), Text("GET", "/after", "after")});
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /s HTTP/1.1\r\n\r\nGET /after HTTP/1.1\r\n\r\n"));
  const std::string got = client.Read(5s, "after");
  EXPECT_THAT(got, HasSubstr("Transfer-Encoding: chunked"));
  EXPECT_THAT(got, HasSubstr("9\r\ndata: 2\n\n\r\n0\r\n\r\nHTTP/1.1 200 OK"));
  RawClient old(server->port());
  ASSERT_TRUE(old.Send("GET /s HTTP/1.0\r\n\r\n"));
  const std::string raw = old.Read(5s);
  EXPECT_THAT(raw, StartsWith("HTTP/1.0 200 OK\r\n"));
  EXPECT_THAT(raw, ::testing::EndsWith("\r\n\r\ndata: 0\n\ndata: 1\n\ndata: 2\n\n"));
  EXPECT_TRUE(old.closed_by_server());
}

TEST(HttpServerTest, APoolRouteSeesItsClientLeave) {
  std::atomic<bool> started{false}, saw_gone{false};
  Route wait{.method = "POST",
             .path = "/wait",
             .execution = Execution::kPool,
             .handle = [&](const Request&, Responder& responder) {
               started = true;
               saw_gone = Eventually([&] { return responder.ClientGone(); }, 5s);
               responder.Send(Response{.body = "late"});
             }};
  auto server = StartOrDie({}, {wait});
  ASSERT_NE(server, nullptr);
  {
    RawClient client(server->port());
    ASSERT_TRUE(client.Send("POST /wait HTTP/1.1\r\nContent-Length: 0\r\n\r\n"));
    ASSERT_TRUE(Eventually([&] { return started.load(); }, 5s));
  }  // the client leaves
  EXPECT_TRUE(Eventually([&] { return saw_gone.load(); }, 6s));
}

TEST(HttpServerTest, ARouteThatDoesNotAnswerGets500AndOneThatThrowsToo) {
  Route silent{.method = "GET", .path = "/silent", .handle = [](const Request&, Responder&) {}};
  Route throwing{.method = "GET",
                 .path = "/throw",
                 .execution = Execution::kPool,
                 .handle = [](const Request&, Responder&) { throw std::runtime_error("boom"); }};
  auto server = StartOrDie({}, {silent, throwing});
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /silent HTTP/1.1\r\n\r\nGET /throw HTTP/1.1\r\n\r\n"));
  const std::string got = client.Read(5s, "boom");
  EXPECT_EQ(Count(got, "HTTP/1.1 500 Internal Server Error"), 2) << got;
}

TEST(HttpServerTest, StopEndsARunningRouteAndClosesTheConnection) {
  std::atomic<bool> started{false};
  Route forever{.method = "GET",
                .path = "/forever",
                .execution = Execution::kPool,
                .handle = [&](const Request&, Responder& responder) {
                  responder.Begin(200, "text/plain");
                  started = true;
                  while (responder.Write("x")) std::this_thread::sleep_for(1ms);
                }};
  auto server = StartOrDie({}, {forever});
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /forever HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(Eventually([&] { return started.load(); }, 5s));
  const auto before = std::chrono::steady_clock::now();
  server->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 5s);
  client.Read(2s);
  EXPECT_TRUE(client.closed_by_server());
}

TEST(HttpServerTest, TheServersOwnErrorsUseTheDoorsFormat) {
  ServerOptions options;
  options.error_response = [](int status, const std::string& message) {
    return Response{.status = status, .content_type = "application/json",
                    .body = "{\"error\":\"" + message + "\"}"};
  };
  auto server = StartOrDie(options, {Text("GET", "/x", "x")});
  ASSERT_NE(server, nullptr);
  RawClient missing(server->port());
  ASSERT_TRUE(missing.Send("GET /nope HTTP/1.1\r\n\r\n"));
  EXPECT_THAT(missing.Read(5s), HasSubstr("404 Not Found\r\nContent-Type: application/json"));
  RawClient wrong_method(server->port());
  ASSERT_TRUE(wrong_method.Send("DELETE /x HTTP/1.1\r\n\r\n"));
  EXPECT_THAT(wrong_method.Read(5s), HasSubstr("{\"error\":\"DELETE is not allowed on /x\"}"));
  RawClient garbage(server->port());
  ASSERT_TRUE(garbage.Send("NOT HTTP AT ALL\r\n\r\n"));
  EXPECT_THAT(garbage.Read(5s), StartsWith("HTTP/1.1 400 Bad Request"));
}

}  // namespace
}  // namespace tessera::http
