#include "tools/soak/http_door.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tools/soak/http_connection.h"

namespace tessera::soak {
namespace {

using Received = HttpConnection::Received;

constexpr int kSlowReaderBufferBytes = 4096;
constexpr size_t kSlowReadPiece = 512;
constexpr int kSenderPieces = 8;

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

absl::Time Deadline(const SoakOptions& options) {
  return absl::Now() + absl::Seconds(options.request_timeout_s);
}

SoakOutcome Outcome(grpc::StatusCode code, std::string message) {
  SoakOutcome outcome;
  outcome.code = code;
  outcome.message = std::move(message);
  return outcome;
}

// How a whole answer (status line to EOF) ended; see http_door.h.
SoakOutcome FromResponse(const std::string& response, bool stream) {
  const int status = HttpStatusOf(response);
  const std::string head = response.substr(0, 160);
  if (status == 503 || absl::StrContains(response, "service_unavailable")) {
    return Outcome(grpc::StatusCode::UNAVAILABLE, head);
  }
  if (status == 429) return Outcome(grpc::StatusCode::RESOURCE_EXHAUSTED, head);
  const bool whole = stream ? absl::StrContains(response, "data: [DONE]") &&
                                  !absl::StrContains(response, "data: {\"error\"")
                            : absl::StrContains(response, "\"choices\"");
  if (status == 200 && whole) {
    SoakOutcome outcome = Outcome(grpc::StatusCode::OK, "");
    outcome.finished_reason_seen = absl::StrContains(response, "\"finish_reason\":\"");
    return outcome;
  }
  return Outcome(grpc::StatusCode::UNKNOWN, absl::StrCat("HTTP ", status, ": ", head));
}

// A connection that has sent `plan`'s whole request; UNAVAILABLE when either step failed.
absl::StatusOr<HttpConnection> ConnectAndSend(const SoakRequest& plan, const std::string& address,
                                              int receive_buffer_bytes) {
  absl::StatusOr<HttpConnection> conn = HttpConnection::Connect(address, receive_buffer_bytes);
  if (!conn.ok()) return conn.status();
  std::string path;
  const std::string body = HttpRequestBody(plan, &path);
  if (!conn->SendAll(PostHead(path, body.size()) + body)) {
    return absl::UnavailableError("the door closed while we sent");
  }
  return conn;
}

SoakOutcome SlowReader(const SoakRequest& plan, const SoakOptions& options,
                       const std::string& address) {
  absl::StatusOr<HttpConnection> conn = ConnectAndSend(plan, address, kSlowReaderBufferBytes);
  if (!conn.ok()) return Outcome(grpc::StatusCode::UNAVAILABLE, conn.status().ToString());
  std::string response;
  const absl::Time deadline = Deadline(options);
  if (plan.stall) {  // the head, then nothing read for a while, then gone
    const Received r = conn->ReceiveSome(&response, 256, deadline - absl::Now());
    if (r == Received::kEof) return FromResponse(response, /*stream=*/true);
    std::this_thread::sleep_for(std::chrono::milliseconds(options.http_stall_ms));
    conn->Close();
    return Outcome(grpc::StatusCode::CANCELLED, "the client stopped reading and left");
  }
  const Received r = conn->ReceiveAll(&response, deadline,
                                      absl::Milliseconds(options.slow_read_delay_ms),
                                      kSlowReadPiece);
  if (r == Received::kTimeout) return Outcome(grpc::StatusCode::DEADLINE_EXCEEDED, "no end");
  return FromResponse(response, /*stream=*/true);
}

SoakOutcome Disconnect(const SoakRequest& plan, const SoakOptions& options,
                       const std::string& address) {
  absl::StatusOr<HttpConnection> conn = ConnectAndSend(plan, address, 0);
  if (!conn.ok()) return Outcome(grpc::StatusCode::UNAVAILABLE, conn.status().ToString());
  std::string response;
  const absl::Time leave = absl::Now() + absl::Milliseconds(plan.disconnect_after_ms);
  if (conn->ReceiveAll(&response, std::min(leave, Deadline(options))) == Received::kTimeout) {
    conn->Close();
    return Outcome(grpc::StatusCode::CANCELLED, "the client left mid-request");
  }
  return FromResponse(response, plan.request_stream);
}

// Half the head, then wait for the door to cut the connection.
SoakOutcome StalledSender(HttpConnection& conn, const std::string& request,
                          const SoakOptions& options) {
  const size_t head_end = request.find("\r\n\r\n");
  if (!conn.SendAll(std::string_view(request).substr(0, head_end / 2))) {
    return Outcome(grpc::StatusCode::OK, "the door closed the stalled sender");
  }
  std::string response;
  const Received r = conn.ReceiveAll(&response, Deadline(options));
  if (r == Received::kTimeout) {
    return Outcome(grpc::StatusCode::DEADLINE_EXCEEDED, "a stalled sender was never cut off");
  }
  const int status = HttpStatusOf(response);
  if (status == -1 || status == 408 || status == 400) {
    return Outcome(grpc::StatusCode::OK, absl::StrCat("cut off (HTTP ", status, ")"));
  }
  return Outcome(grpc::StatusCode::UNKNOWN, absl::StrCat("a stalled sender got HTTP ", status));
}

SoakOutcome SlowSender(const SoakRequest& plan, const SoakOptions& options,
                       const std::string& address) {
  absl::StatusOr<HttpConnection> conn = HttpConnection::Connect(address);
  if (!conn.ok()) return Outcome(grpc::StatusCode::UNAVAILABLE, conn.status().ToString());
  std::string path;
  const std::string body = HttpRequestBody(plan, &path);
  const std::string request = PostHead(path, body.size()) + body;
  if (plan.stall) return StalledSender(*conn, request, options);
  const size_t piece = (request.size() + kSenderPieces - 1) / kSenderPieces;
  for (size_t at = 0; at < request.size(); at += piece) {
    if (at > 0) std::this_thread::sleep_for(std::chrono::milliseconds(options.slow_read_delay_ms));
    if (!conn->SendAll(std::string_view(request).substr(at, piece))) {
      return Outcome(grpc::StatusCode::UNKNOWN, "the door closed a slow but timely sender");
    }
  }
  std::string response;
  if (conn->ReceiveAll(&response, Deadline(options)) == Received::kTimeout) {
    return Outcome(grpc::StatusCode::DEADLINE_EXCEEDED, "no answer");
  }
  return FromResponse(response, plan.request_stream);
}

}  // namespace

bool IsHttpBehaviour(Behaviour b) {
  return b == Behaviour::kHttpSlowReader || b == Behaviour::kHttpDisconnect ||
         b == Behaviour::kHttpSlowSender;
}

std::string HttpRequestBody(const SoakRequest& plan, std::string* path) {
  const ::tessera::v1::GenerateRequest& r = plan.request;
  std::string input;
  if (r.has_chat()) {
    *path = "/v1/chat/completions";
    input = absl::StrCat("\"messages\":[{\"role\":\"user\",\"content\":",
                         JsonString(r.chat().messages(0).content()), "}]");
  } else {
    *path = "/v1/completions";
    input = absl::StrCat("\"prompt\":", JsonString(r.text()));
  }
  return absl::StrCat("{", input, ",\"max_tokens\":", r.max_tokens(),
                      ",\"ignore_eos\":", r.ignore_eos() ? "true" : "false",
                      ",\"temperature\":", r.sampling().temperature(),
                      ",\"stream\":", plan.request_stream ? "true" : "false", "}");
}

SoakOutcome RunHttpDoorRequest(const SoakRequest& plan, const SoakOptions& options,
                               const std::string& http_address) {
  switch (plan.behaviour) {
    case Behaviour::kHttpSlowReader: return SlowReader(plan, options, http_address);
    case Behaviour::kHttpDisconnect: return Disconnect(plan, options, http_address);
    case Behaviour::kHttpSlowSender: return SlowSender(plan, options, http_address);
    default: break;
  }
  return Outcome(grpc::StatusCode::INTERNAL, "not an HTTP behaviour");
}

}  // namespace tessera::soak
