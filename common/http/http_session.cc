#include "common/http/http_session.h"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

// GCC 12 sees Beast 1.74's parser's boost::optional<uint64_t> members (body_limit_) as maybe
// used uninitialized once inlined here, with or without sanitizers; they are set in Beast's
// constructor. A false positive in a third-party header, silenced for this file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/status/status.h"
#include "common/util/absl_compat.h"
#include "common/http/responder.h"
#include "common/http/wire_format.h"

namespace tessera::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// After a refused request, what the client still sends (the rest of a body we did not want) is
// read and dropped for a moment, so closing does not reset the connection before the client has
// read the answer.
constexpr std::chrono::seconds kLingerTimeout{2};
constexpr size_t kMaxLingerBytes = size_t{1} << 20;
constexpr std::chrono::seconds kTlsShutdownTimeout{1};

// Runs a route and makes sure the request is answered: a route that returned without an answer
// gets a 500, an open stream is ended, and an exception becomes a 500 (or ends the stream).
void RunRoute(const Route& route, const Request& request, Responder& responder,
              const ServerCore& core) {
  try {
    route.handle(request, responder);
  } catch (const std::exception& e) {
    if (!responder.Answered()) {
      responder.Send(core.Error(500, absl::StrCat("internal error: ", e.what())));
    }
  }
  if (!responder.Answered()) responder.Send(core.Error(500, "the route gave no answer"));
  responder.End();
}

bool IsParseError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category();
}

template <class Stream>
class Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... StreamArgs>
  Session(ServerCore* core, ConnectionLimits::Slot slot, std::string peer, StreamArgs&&... args)
      : core_(core),
        slot_(std::move(slot)),
        peer_(std::move(peer)),
        stream_(std::forward<StreamArgs>(args)...) {}

  ~Session() override {
    core_->body_budget.Resize(peer_, &body_bytes_held_, 0);
    core_->connections.erase(this);
  }

  void Run() {
    core_->connections.emplace(this, this->weak_from_this());
    const Clock::time_point deadline = Clock::now() + Limits().header_timeout;
    if constexpr (kTls) {
      Lowest().expires_at(deadline);
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this(), deadline](beast::error_code ec) {
                                if (ec) return self->Close();
                                self->ReadHead(deadline);
                              });
    } else {
      ReadHead(deadline);
    }
  }

  void Close() override {
    if (closed_) return;
    closed_ = true;
    if (responder_ != nullptr) responder_->MarkGone();
    keep_alive_while_answering_.reset();
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }
  const ServerLimits& Limits() const { return core_->options.limits; }

  // --- reading a request ---

  void ReadHead(Clock::time_point deadline) {
    if (closed_ || core_->stopping) return Close();
    head_parser_.emplace();
    // The declared length is checked against the cap in OnHead (after admission). Not
    // boost::none: Beast 1.74 compares lengths against the optional, and anything beats none.
    head_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    head_parser_->header_limit(
        static_cast<uint32_t>(Limits().max_header_bytes + Limits().max_target_bytes));
    Lowest().expires_at(deadline);
    bhttp::async_read_header(
        stream_, buffer_, *head_parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHead(ec); });
  }

  void OnHead(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    request_ = std::make_shared<Request>(RequestOf(head_parser_->get()));
    version_ = request_->version;
    if (absl::Status refused = CheckHead(); !refused.ok()) return;
    if (route_->admit) {
      if (std::optional<Response> answer = route_->admit(*request_)) {
        return AnswerAndClose(*std::move(answer));
      }
    }
    if (auto length = head_parser_->content_length(); length.has_value()) {
      if (*length > Limits().max_body_bytes) return RefuseTooLarge();
      if (!core_->body_budget.Resize(peer_, &body_bytes_held_, *length)) {
        return RefuseBusyWithBodies();
      }
    }
    if (ExpectsContinue()) return SendContinueThenReadBody();
    ReadBody();
  }

  Request RequestOf(const bhttp::request_parser<bhttp::empty_body>::value_type& head) const {
    Request request;
    request.method = std::string(head.method_string());
    request.target = std::string(head.target());
    request.path = request.target.substr(0, request.target.find('?'));
    request.version = head.version() == 10 ? 10 : 11;
    request.peer = peer_;
    for (const auto& field : head) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    return request;
  }

  // The caps on the head and the route lookup; on failure the refusal is already on its way.
  absl::Status CheckHead() {
    size_t header_bytes = 0;
    for (const auto& [name, value] : request_->headers) header_bytes += name.size() + value.size();
    auto refuse = [this](int status, std::string message) {
      Refuse(status, message);
      return absl::FailedPreconditionError(message);
    };
    if (request_->target.size() > Limits().max_target_bytes) {
      return refuse(414, absl::StrCat("the request target is longer than ",
                                      Limits().max_target_bytes, " bytes"));
    }
    if (request_->headers.size() > Limits().max_header_count ||
        header_bytes > Limits().max_header_bytes) {
      return refuse(431, absl::StrCat("the request has more than ", Limits().max_header_count,
                                      " header fields or ", Limits().max_header_bytes,
                                      " bytes of them"));
    }
    bool path_known = false;
    route_ = core_->FindRoute(request_->method, request_->path, &path_known);
    if (route_ != nullptr) return absl::OkStatus();
    return path_known ? refuse(405, absl::StrCat(request_->method, " is not allowed on ",
                                                 request_->path))
                      : refuse(404, absl::StrCat("no route for ", request_->method, " ",
                                                 request_->path));
  }

  bool ExpectsContinue() const {
    std::optional<std::string_view> expect = request_->Header("Expect");
    return version_ == 11 && expect.has_value() && absl::EqualsIgnoreCase(util::ToAbsl(*expect), "100-continue");
  }

  void SendContinueThenReadBody() {
    out_ = "HTTP/1.1 100 Continue\r\n\r\n";
    Lowest().expires_after(Limits().write_timeout);
    net::async_write(stream_, net::buffer(out_),
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Close();
                       self->ReadBody();
                     });
  }

  void ReadBody() {
    body_parser_.emplace(std::move(*head_parser_));
    head_parser_.reset();
    body_parser_->body_limit(Limits().max_body_bytes);
    Lowest().expires_after(Limits().body_timeout);  // for the whole body, not each piece
    ReadBodyPiece();
  }

  // Reads what has arrived, growing this connection's share of the server's body budget.
  void ReadBodyPiece() {
    if (body_parser_->is_done()) return OnBody();
    bhttp::async_read_some(
        stream_, buffer_, *body_parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) {
          if (ec) return self->OnReadError(ec);
          // A declared length was reserved whole; a chunked body grows as it arrives.
          const size_t buffered = self->body_parser_->get().body().size() + self->buffer_.size();
          if (buffered > self->body_bytes_held_ &&
              !self->core_->body_budget.Resize(self->peer_, &self->body_bytes_held_, buffered)) {
            return self->RefuseBusyWithBodies();
          }
          self->ReadBodyPiece();
        });
  }

  void OnBody() {
    request_->body = std::move(body_parser_->get().body());
    keep_alive_ = body_parser_->keep_alive();
    body_parser_.reset();
    Dispatch();
  }

  void OnReadError(beast::error_code ec) {
    if (closed_) return;
    if (ec == bhttp::error::header_limit) {
      return Refuse(431, absl::StrCat("the request head is larger than ",
                                      Limits().max_header_bytes + Limits().max_target_bytes,
                                      " bytes"));
    }
    if (ec == bhttp::error::body_limit) return RefuseTooLarge();
    if (ec != bhttp::error::end_of_stream && IsParseError(ec)) {
      return Refuse(400, absl::StrCat("malformed HTTP request: ", ec.message()));
    }
    Close();  // the client left, or took longer than its deadline
  }

  // --- answering ---

  void Dispatch() {
    Lowest().expires_never();
    // No read or write may be pending while a route works on its answer: hold the session.
    keep_alive_while_answering_ = this->shared_from_this();
    responder_ = std::make_shared<Responder>(version_, keep_alive_ && !core_->stopping,
                                             Limits().max_unsent_bytes, Limits().write_timeout);
    std::weak_ptr<Session> weak = this->weak_from_this();
    responder_->SetWake([weak, executor = core_->io.get_executor()] {
      net::post(executor, [weak] {
        if (std::shared_ptr<Session> self = weak.lock()) self->Flush();
      });
    });
    if (route_->execution == Execution::kInline) {
      return RunRoute(*route_, *request_, *responder_, *core_);
    }
    auto task = [route = route_, request = request_, responder = responder_, core = core_] {
      RunRoute(*route, *request, *responder, *core);
    };
    if (!core_->pool.TryPost(std::move(task))) {
      return responder_->Send(core_->Error(
          503, "the server is busy: too many requests wait for a handler; retry later"));
    }
    WatchForDeparture();
  }

  // While a pool route runs, a readable socket with nothing to read means the client left.
  void WatchForDeparture() {
    watching_ = true;
    Lowest().socket().async_wait(
        tcp::socket::wait_read,
        [self = this->shared_from_this(), request = request_](beast::error_code ec) {
          if (ec || request != self->request_ || self->closed_) return;
          self->watching_ = false;
          char byte;
          const ssize_t n = ::recv(self->Lowest().socket().native_handle(), &byte, 1,
                                   MSG_PEEK | MSG_DONTWAIT);
          // More bytes: the client is still there (a pipelined request, a TLS record).
          if (n > 0) return;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return self->WatchForDeparture();
          }
          self->Close();  // EOF or reset: the route sees its client gone
        });
  }

  void Flush() {
    if (closed_ || writing_ || responder_ == nullptr) return;
    Responder::Output output = responder_->TakeOutput();
    close_after_ = close_after_ || output.close_after;
    if (output.bytes.empty()) {
      if (output.finished) FinishRequest();
      return;
    }
    writing_ = true;
    out_ = std::move(output.bytes);
    Lowest().expires_after(Limits().write_timeout);
    net::async_write(stream_, net::buffer(out_),
                     [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                       self->writing_ = false;
                       if (ec) return self->Close();
                       self->responder_->Written(n);
                       self->Flush();
                     });
  }

  void FinishRequest() {
    if (watching_) {
      beast::error_code ignored;
      Lowest().socket().cancel(ignored);
      watching_ = false;
    }
    responder_.reset();
    request_.reset();
    route_ = nullptr;
    core_->body_budget.Resize(peer_, &body_bytes_held_, 0);
    std::shared_ptr<Session> self = std::move(keep_alive_while_answering_);
    if (!keep_alive_ || close_after_ || core_->stopping) return GracefulClose();
    ReadHead(Clock::now() + Limits().keep_alive_timeout);
  }

  void RefuseTooLarge() {
    Refuse(413, absl::StrCat("the request body is larger than ", Limits().max_body_bytes,
                             " bytes"));
  }

  void RefuseBusyWithBodies() {
    Refuse(503, "the server holds too many request bodies; retry later");
  }

  void Refuse(int status, const std::string& message) {
    AnswerAndClose(core_->Error(status, message));
  }

  // Answers the request at hand (its body may be unread) and closes the connection.
  void AnswerAndClose(const Response& response) {
    out_ = FormatResponse(response, version_, /*keep_alive=*/false);
    Lowest().expires_after(Limits().write_timeout);
    net::async_write(stream_, net::buffer(out_),
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Close();
                       self->GracefulClose();
                     });
  }

  void GracefulClose() {
    if (closed_) return;
    if constexpr (kTls) {
      Lowest().expires_after(kTlsShutdownTimeout);
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
        self->Close();
      });
    } else {
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Lowest().expires_after(kLingerTimeout);
      Linger();
    }
  }

  void Linger() {
    Lowest().async_read_some(net::buffer(linger_buffer_),
                             [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                               self->lingered_ += n;
                               if (ec || self->lingered_ > kMaxLingerBytes) return self->Close();
                               self->Linger();
                             });
  }

  ServerCore* const core_;
  const ConnectionLimits::Slot slot_;
  const std::string peer_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::empty_body>> head_parser_;
  std::optional<bhttp::request_parser<bhttp::string_body>> body_parser_;
  std::shared_ptr<Request> request_;  // the request being answered
  const Route* route_ = nullptr;
  std::shared_ptr<Responder> responder_;
  // Set from dispatch until the answer is written (or the connection closes).
  std::shared_ptr<Session> keep_alive_while_answering_;
  int version_ = 11;
  bool keep_alive_ = false;
  bool close_after_ = false;
  bool writing_ = false;
  bool watching_ = false;
  bool closed_ = false;
  size_t body_bytes_held_ = 0;  // this connection's share of core_->body_budget
  std::string out_;  // the bytes being written
  std::array<char, 16384> linger_buffer_;
  size_t lingered_ = 0;
};

}  // namespace

void StartSession(ServerCore* core, tcp::socket socket, ConnectionLimits::Slot slot,
                  std::string peer) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // SSE pieces go out as they come
  if (core->tls.has_value()) {
    std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        core, std::move(slot), std::move(peer), std::move(socket), *core->tls)
        ->Run();
  } else {
    std::make_shared<Session<beast::tcp_stream>>(core, std::move(slot), std::move(peer),
                                                 std::move(socket))
        ->Run();
  }
}

}  // namespace tessera::http
