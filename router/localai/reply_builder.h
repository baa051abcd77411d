// LocalAI's Reply (proto/localai/backend.proto) built from one request's engine events:
//
//   - every Reply: the new text in `message`, cumulative `tokens`, `prompt_tokens`, and both
//     timings in ms (arrival to first token, first token to now), which LocalAI keeps from the
//     last Reply it sees;
//   - with logprobs asked for: each Reply's own tokens' logprobs in `logprobs`, and Whole(): the
//     answer as one Reply (all the text, the last counts, every token's logprobs).
//
// `logprobs` is JSON that LocalAI's Go side unmarshals into its schema.Logprobs (OpenAI's chat
// `logprobs` object, as its llama.cpp backend sends it):
//
//   {"content": [{"id": 42, "token": " Paris", "bytes": [32, 80, ...], "logprob": -0.1,
//                 "top_logprobs": [{"id": 42, "token": " Paris", "bytes": [...],
//                                   "logprob": -0.1}, ...]}, ...]}
//
// `token` is the token's own text (special tokens spelled out); a token that holds part of a
// UTF-8 character has U+FFFD in `token` and its exact bytes in `bytes`. A logprob that is not
// finite (a banned token's -inf) is written as -9999, OpenAI's floor, so the JSON stays numbers.
//
// Threading: one ReplyBuilder per request, used by its handler thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "localai/backend.pb.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router::localai {

// The text token `id` stands for; "" when the id is not the model's.
using TokenTextFn = std::function<std::string(int32_t id)>;

// The `logprobs` JSON of `logprobs` (never throws: invalid UTF-8 becomes U+FFFD).
std::string ReplyLogprobsJson(
    const google::protobuf::RepeatedPtrField<::tessera::v1::TokenLogprob>& logprobs,
    const TokenTextFn& token_text);

class ReplyBuilder {
 public:
  using Clock = std::chrono::steady_clock;

  // `start`: when the request was submitted (the prompt-processing timing starts there).
  ReplyBuilder(int prompt_tokens, bool logprobs, TokenTextFn token_text,
               Clock::time_point start = Clock::now());

  // The Reply of one engine event (`closed`: the request's last, whose usage has the final
  // count).
  ::backend::Reply Next(const ::tessera::v1::GenerateResponse& response, bool closed);
  // The answer so far as one Reply.
  ::backend::Reply Whole() const;

 private:
  const int prompt_tokens_;
  const bool logprobs_;
  const TokenTextFn token_text_;
  const Clock::time_point start_;
  std::optional<Clock::time_point> first_token_;
  int tokens_ = 0;
  std::string text_;
  google::protobuf::RepeatedPtrField<::tessera::v1::TokenLogprob> logprobs_so_far_;
  ::backend::Reply last_;
};

}  // namespace tessera::router::localai
