// Encoding of OpenAI-style responses: completion and chat.completion objects, their streaming
// chunks (server-sent events `data: {json}\n\n`, ending with `data: [DONE]\n\n`), usage, logprobs
// in each endpoint's shape, and the OpenAI error object with its HTTP status.
//
// Threading: a ResponseEncoder belongs to one HTTP handler thread; the free functions are pure.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "router/openai/reasoning_splitter.h"
#include "router/openai/tool_call_parser.h"
#include "absl/status/status.h"
#include "common/tokenizer/tokenizer.h"
#include "router/openai/openai_request.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router::openai {

// The HTTP status for a failed request: 400 invalid argument, 401 unauthenticated, 404 not
// found, 429 queue full, 503 unavailable (no worker, draining), 504 deadline, 500 otherwise.
int HttpStatusOf(const absl::Status& status);
// {"error": {"message", "type", "param", "code"}}; `param` is the field the message starts with
// (INVALID_ARGUMENT), else null.
nlohmann::json ErrorBody(const absl::Status& status);
// The error object for an HTTP status the HTTP server raised itself (413, 431, ...): the same
// shape, with the type that status implies.
nlohmann::json HttpErrorBody(int http, std::string message);
// The Content-Type of every JSON answer.
inline constexpr char kJsonContentType[] = "application/json; charset=utf-8";
// `json` as compact text; invalid UTF-8 (a token that splits a character) becomes U+FFFD.
std::string Dump(const nlohmann::json& json);
// "data: <json>\n\n"
std::string SseEvent(const nlohmann::json& json);
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// "stop" (stop string, stop token, EOS) or "length"; null while unfinished.
nlohmann::json FinishReason(::tessera::v1::FinishReason reason);

// Everything one choice produced (the non-streaming answer).
struct ChoiceResult {
  std::string text = {};
  std::vector<::tessera::v1::TokenLogprob> logprobs = {};
  ::tessera::v1::FinishReason finish_reason = ::tessera::v1::FINISH_REASON_UNSPECIFIED;
  ::tessera::v1::Usage usage = {};
};

class ResponseEncoder {
 public:
  // `reasoning`: how the model's output carries its reasoning (chat; split into
  // reasoning_content by ReasoningSplitter). `tool_calls`: how it writes tool calls, when the
  // request offered tools or forced a call (parsed into tool_calls by ToolCallParser;
  // finish_reason "tool_calls"); inactive otherwise.
  ResponseEncoder(Endpoint endpoint, std::string id, std::string model, int64_t created,
                  const tokenizer::Tokenizer* tokenizer, bool logprobs, bool include_usage,
                  chat::ReasoningFormat reasoning = chat::ReasoningFormat::kNone,
                  ToolCallMode tool_calls = {});

  // completions with `echo`: every choice's text starts with the prompt's.
  void set_echo(std::string prompt_text) { echo_ = std::move(prompt_text); }

  // A streaming chunk for choice `choice`: its new text (a chat choice's first chunk also
  // carries the assistant role), logprobs, and finish_reason on its last chunk.
  nlohmann::json Chunk(int choice, const ::tessera::v1::GenerateResponse& delta, bool first);
  // The final chunk of stream_options.include_usage: no choices, the usage.
  nlohmann::json UsageChunk(const nlohmann::json& usage) const;
  // The whole non-streaming response.
  nlohmann::json Complete(const std::vector<ChoiceResult>& choices) const;
  // prompt tokens once (the choices share the prompt), completion tokens of every choice.
  static nlohmann::json Usage(const std::vector<::tessera::v1::Usage>& per_choice);

 private:
  nlohmann::json Envelope(const char* object) const;
  nlohmann::json Logprobs(const std::vector<::tessera::v1::TokenLogprob>& logprobs,
                          int64_t* text_offset) const;
  nlohmann::json TokenEntry(int32_t id, float logprob) const;

  Endpoint endpoint_;
  std::string id_;
  std::string model_;
  int64_t created_;
  const tokenizer::Tokenizer* tokenizer_;
  bool logprobs_;
  bool include_usage_;
  std::vector<int64_t> text_offsets_;  // per choice: completions logprobs' running text_offset
  std::string echo_;  // prepended to each completions choice's text
  chat::ReasoningFormat reasoning_;
  std::vector<ReasoningSplitter> splitters_;  // per choice (chat)
  ToolCallMode tool_calls_;
  std::vector<ToolCallParser> tool_parsers_;  // per choice (chat)
  std::vector<int> calls_emitted_;            // per choice: tool calls streamed so far

  // The chat delta of one chunk: content, reasoning_content, tool_calls; sets *had_calls.
  nlohmann::json ChatDelta(int choice, const std::string& text, bool finished, bool* had_calls);
  nlohmann::json ToolCallsJson(int choice, const std::vector<ParsedToolCall>& calls, int first);
  // Drops the calls past ToolCallMode::max_calls, `emitted` having been sent already.
  void KeepAllowedCalls(int emitted, std::vector<ParsedToolCall>* calls) const;
};

}  // namespace tessera::router::openai
