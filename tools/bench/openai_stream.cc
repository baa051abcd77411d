#include "tools/bench/openai_stream.h"

#include <httplib.h>

#include <algorithm>

#include <chrono>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Json ToBody(const std::string& model, const RequestShape& shape, const LevelOptions& options) {
  Json body = {{"model", model},
               {"max_tokens", shape.output_tokens},
               {"temperature", options.temperature},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (shape.prompt_ids.empty()) {
    body["prompt"] = shape.prompt_text;
  } else {
    body["prompt"] = shape.prompt_ids;
  }
  return body;
}

// Splits the SSE byte stream into `data:` payloads.
class SseParser {
 public:
  template <typename OnData>
  void Feed(const char* data, size_t size, OnData on_data) {
    buffer_.append(data, size);
    for (size_t end; (end = buffer_.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      if (event.rfind("data: ", 0) == 0) on_data(event.substr(6));
    }
  }

 private:
  std::string buffer_;
};

}  // namespace

RequestRecord RunOpenAiRequest(const std::string& http_addr, const std::string& model,
                               const RequestShape& shape, const LevelOptions& options,
                               const ClientAuth& auth) {
  RequestRecord record;
  httplib::Client client((auth.tls_ca.empty() ? "http://" : "https://") + http_addr);
  if (!auth.tls_ca.empty()) client.set_ca_cert_path(auth.tls_ca.c_str());
  client.set_read_timeout(static_cast<time_t>(options.request_timeout_s));
  const std::string body = ToBody(model, shape, options).dump();
  const Clock::time_point start = Clock::now();
  Clock::time_point first = start, previous = start;
  int64_t chunks = 0;
  SseParser parser;
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.body = body;
  request.set_header("Content-Type", "application/json");
  if (!auth.api_key.empty()) request.set_header("Authorization", "Bearer " + auth.api_key);
  std::string error_body;  // an error answer is JSON, not SSE: kept (its first 4 KiB) to show
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (error_body.size() < 4096) error_body.append(data, std::min<size_t>(size, 4096));
    parser.Feed(data, size, [&](const std::string& payload) {
      if (payload == "[DONE]") return;
      const Json chunk = Json::parse(payload, nullptr, false);
      if (chunk.is_discarded()) return;
      if (chunk.contains("error")) record.error = chunk["error"].value("message", "error");
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        record.output_tokens = chunk["usage"].value("completion_tokens", int64_t{0});
        record.prompt_tokens = chunk["usage"].value("prompt_tokens", int64_t{0});
      }
      if (!chunk.contains("choices") || chunk["choices"].empty()) return;
      const Clock::time_point now = Clock::now();
      if (chunks == 0) {
        record.ttft_s = Seconds(now - start);
        first = now;
      } else {
        record.itl_s.push_back(Seconds(now - previous));
      }
      previous = now;
      ++chunks;
    });
    return true;
  };
  httplib::Result result = client.send(request);
  record.e2e_s = Seconds(Clock::now() - start);
  if (!result) {
    record.error = absl::StrCat("HTTP: ", httplib::to_string(result.error()));
  } else if (result->status != 200) {
    record.error = absl::StrCat("HTTP ", result->status, ": ", error_body);
  }
  record.ok = record.error.empty();
  if (record.output_tokens >= 2 && previous > first) {
    record.decode_tok_s = static_cast<double>(record.output_tokens - 1) / Seconds(previous - first);
  }
  return record;
}

}  // namespace tessera::bench
