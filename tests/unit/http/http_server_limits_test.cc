// HttpServer against hostile clients, over real loopback sockets: total deadlines for a trickled
// head, inline routes answering while slow clients and busy pool threads abound, bodies refused
// before they are read (413, admission's 401), header and target caps (431, 414), connection
// caps, and an exclusively bound port.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/http/http_server.h"
#include "tests/unit/http/raw_client.h"
#include "tests/unit/http/test_server.h"

namespace tessera::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::EchoSize;
using testing::Eventually;
using testing::RawClient;
using testing::StartOrDie;
using testing::Text;
using namespace std::chrono_literals;

TEST(HttpServerLimitsTest, ATrickledHeadIsCutAtItsTotalDeadline) {
  ServerOptions options;
  options.limits.header_timeout = 400ms;
  auto server = StartOrDie(options, {Text("GET", "/health", "ok")});
  ASSERT_NE(server, nullptr);
  RawClient slow(server->port());
  const auto start = std::chrono::steady_clock::now();
  const std::string head = "GET /health HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  bool cut = false;
  for (char c : head) {  // one byte every 50 ms: each read is quick, the whole is not
    if (!slow.Send(std::string(1, c))) {
      cut = true;
      break;
    }
    slow.Read(50ms);
    if (slow.closed_by_server()) {
      cut = true;
      break;
    }
  }
  EXPECT_TRUE(cut);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
}

TEST(HttpServerLimitsTest, InlineRoutesAnswerWhileSlowClientsAndBusyPoolThreadsAbound) {
  std::atomic<bool> release{false};
  Route busy{.method = "POST",
             .path = "/busy",
             .execution = Execution::kPool,
             .handle = [&](const Request&, Responder& responder) {
               Eventually([&] { return release.load() || responder.ClientGone(); }, 10s);
               responder.Send(Response{.body = "done"});
             }};
  ServerOptions options;
  options.pool_threads = 2;
  auto server = StartOrDie(options, {busy, Text("GET", "/health", "ok")});
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawClient>> hostile;
  for (int i = 0; i < 130; ++i) {  // a partial head each: no thread may wait on them
    hostile.push_back(std::make_unique<RawClient>(server->port()));
    ASSERT_TRUE(hostile.back()->Send("GET /health HTTP/1.1\r\nX: "));
  }
  for (int i = 0; i < 2; ++i) {  // every pool thread busy
    hostile.push_back(std::make_unique<RawClient>(server->port()));
    ASSERT_TRUE(hostile.back()->Send("POST /busy HTTP/1.1\r\nContent-Length: 0\r\n\r\n"));
  }
  for (int i = 0; i < 5; ++i) {
    RawClient health(server->port());
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(health.Send("GET /health HTTP/1.1\r\n\r\n"));
    EXPECT_THAT(health.Read(2s, "ok"), StartsWith("HTTP/1.1 200 OK"));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  }
  release = true;
}

TEST(HttpServerLimitsTest, AnOversizedBodyIsRefusedBeforeItIsSent) {
  ServerOptions options;
  options.limits.max_body_bytes = 1000;
  auto server = StartOrDie(options, {EchoSize("/echo")});
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(client.Send("POST /echo HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n"));
  EXPECT_THAT(client.Read(3s), StartsWith("HTTP/1.1 413 Payload Too Large"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE(client.closed_by_server());
  // A chunked body is cut when it passes the cap.
  RawClient chunked(server->port());
  ASSERT_TRUE(chunked.Send("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  ASSERT_TRUE(chunked.Send("7d0\r\n" + std::string(2000, 'x') + "\r\n"));
  EXPECT_THAT(chunked.Read(3s), StartsWith("HTTP/1.1 413 Payload Too Large"));
  // Within the cap the body arrives whole.
  RawClient fine(server->port());
  ASSERT_TRUE(fine.Send("POST /echo HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" +
                        std::string(1000, 'y')));
  EXPECT_THAT(fine.Read(3s, "1000"), HasSubstr("\r\n\r\n1000"));
}

TEST(HttpServerLimitsTest, BodiesHeldAtOnceAreCappedInAllAndPerClient) {
  ServerOptions options;
  options.limits.max_pending_body_bytes = 4000;  // a client may hold 1000
  auto server = StartOrDie(options, {EchoSize("/echo")});
  ASSERT_NE(server, nullptr);
  // A declared length reserves its bytes at once: of two bodies from the same client that
  // together pass the client's quarter, the one whose head the server reads second (the two
  // connections are read in either order) is refused before it is sent; the other completes.
  RawClient first(server->port()), second(server->port());
  ASSERT_TRUE(first.Send("POST /echo HTTP/1.1\r\nContent-Length: 800\r\n\r\n" +
                         std::string(100, 'a')));
  ASSERT_TRUE(second.Send("POST /echo HTTP/1.1\r\nContent-Length: 800\r\n\r\n"));
  RawClient* const clients[2] = {&first, &second};
  std::string answers[2];
  int refused = -1;
  for (int round = 0; round < 300 && refused < 0; ++round) {  // up to ~6 s
    for (int c = 0; c < 2 && refused < 0; ++c) {
      answers[c] += clients[c]->Read(10ms);
      if (answers[c].starts_with("HTTP/1.1 503")) refused = c;
    }
  }
  ASSERT_GE(refused, 0) << "neither body was refused: " << answers[0] << " | " << answers[1];
  RawClient& kept = *clients[1 - refused];
  ASSERT_TRUE(kept.Send(std::string(refused == 1 ? 700 : 800, 'a')));  // the rest of its body
  EXPECT_THAT(answers[1 - refused] + kept.Read(3s, "800"), HasSubstr("\r\n\r\n800"));
  // Once answered, the bytes are given back.
  RawClient third(server->port());
  ASSERT_TRUE(third.Send("POST /echo HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" +
                         std::string(1000, 'c')));
  EXPECT_THAT(third.Read(3s, "1000"), HasSubstr("\r\n\r\n1000"));
  // A chunked body is counted as it arrives.
  RawClient chunked(server->port());
  ASSERT_TRUE(chunked.Send("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  ASSERT_TRUE(chunked.Send("258\r\n" + std::string(600, 'd') + "\r\n"));
  ASSERT_TRUE(chunked.Send("258\r\n" + std::string(600, 'd') + "\r\n"));
  EXPECT_THAT(chunked.Read(3s), StartsWith("HTTP/1.1 503"));
}

TEST(HttpServerLimitsTest, AdmissionRefusesOnTheHeadAlone) {
  std::atomic<int> handled{0};
  Route guarded = EchoSize("/guarded");
  guarded.admit = [](const Request& head) -> std::optional<Response> {
    if (head.Header("authorization") == "Bearer k") return std::nullopt;
    return Response{.status = 401, .body = "no", .headers = {{"WWW-Authenticate", "Bearer"}}};
  };
  guarded.handle = [&](const Request&, Responder& responder) {
    ++handled;
    responder.Send(Response{.body = "yes"});
  };
  auto server = StartOrDie({}, {guarded});
  ASSERT_NE(server, nullptr);
  RawClient stranger(server->port());
  ASSERT_TRUE(stranger.Send("POST /guarded HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n"));
  const std::string got = stranger.Read(3s);
  EXPECT_THAT(got, StartsWith("HTTP/1.1 401 Unauthorized"));
  EXPECT_THAT(got, HasSubstr("WWW-Authenticate: Bearer"));
  RawClient friendly(server->port());
  ASSERT_TRUE(friendly.Send("POST /guarded HTTP/1.1\r\nAuthorization: Bearer k\r\n"
                            "Content-Length: 2\r\n\r\nhi"));
  EXPECT_THAT(friendly.Read(3s, "yes"), HasSubstr("yes"));
  EXPECT_EQ(handled.load(), 1);
}

TEST(HttpServerLimitsTest, HeaderAndTargetCapsAnswer431And414) {
  auto server = StartOrDie({}, {Text("GET", "/x", "x")});
  ASSERT_NE(server, nullptr);
  std::string many = "GET /x HTTP/1.1\r\n";
  for (int i = 0; i < 200; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  RawClient fields(server->port());
  ASSERT_TRUE(fields.Send(many + "\r\n"));
  EXPECT_THAT(fields.Read(3s), StartsWith("HTTP/1.1 431 Request Header Fields Too Large"));
  RawClient big(server->port());
  ASSERT_TRUE(big.Send("GET /x HTTP/1.1\r\nX-Big: " + std::string(80 << 10, 'a') + "\r\n\r\n"));
  EXPECT_THAT(big.Read(3s), StartsWith("HTTP/1.1 431"));
  // A flood of header bytes is cut near the cap, not buffered.
  RawClient flood(server->port());
  ASSERT_TRUE(flood.Send("GET /x HTTP/1.1\r\nX-Flood: "));
  size_t sent = 0;
  const std::string mb(1 << 20, 'f');
  while (sent < (size_t{80} << 20) && flood.Send(mb)) sent += mb.size();
  EXPECT_LT(sent, size_t{80} << 20) << "the server kept reading an endless header";
  RawClient target(server->port());
  ASSERT_TRUE(target.Send("GET /x?" + std::string(9 << 10, 'q') + " HTTP/1.1\r\n\r\n"));
  EXPECT_THAT(target.Read(3s), StartsWith("HTTP/1.1 414 URI Too Long"));
}

TEST(HttpServerLimitsTest, ConnectionsAreCappedPerClient) {
  ServerOptions options;
  options.limits.max_connections_per_client = 2;
  auto server = StartOrDie(options, {Text("GET", "/x", "x")});
  ASSERT_NE(server, nullptr);
  RawClient a(server->port()), b(server->port());
  ASSERT_TRUE(a.Send("GET /x HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(b.Send("GET /x HTTP/1.1\r\n\r\n"));
  a.Read(2s, "\r\n\r\nx");
  b.Read(2s, "\r\n\r\nx");
  RawClient c(server->port());
  const std::string refused = c.Read(2s);
  EXPECT_THAT(refused, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(refused, ::testing::EndsWith("Content-Length: 34\r\nConnection: close\r\n\r\n"
                                           "too many connections; retry later\n"));
  EXPECT_TRUE(c.closed_by_server());
  a.Close();
  ASSERT_TRUE(Eventually(
      [&] {
        RawClient d(server->port());
        d.Send("GET /x HTTP/1.1\r\n\r\n");
        return d.Read(1s, "\r\n\r\nx").find("200 OK") != std::string::npos;
      },
      5s));
}

TEST(HttpServerLimitsTest, ThePortIsBoundExclusively) {
  auto server = StartOrDie({}, {Text("GET", "/x", "x")});
  ASSERT_NE(server, nullptr);
  ServerOptions same;
  same.port = server->port();
  EXPECT_FALSE(HttpServer::Start(same, {Text("GET", "/x", "x")}).ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &yes, sizeof(yes));
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ::close(fd);
}

}  // namespace
}  // namespace tessera::http
