#include "router/localai/reply_builder.h"

#include <cmath>
#include <utility>

#include "nlohmann/json.hpp"

namespace tessera::router::localai {
namespace {

using Json = nlohmann::json;
namespace v1 = ::tessera::v1;

constexpr double kLogprobFloor = -9999.0;  // OpenAI's value for "as good as impossible"

double MillisSince(ReplyBuilder::Clock::time_point start, ReplyBuilder::Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

Json Entry(int32_t id, float logprob, const TokenTextFn& token_text) {
  const std::string text = token_text(id);
  Json bytes = Json::array();
  for (const unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return {{"id", id},
          {"token", text},
          {"bytes", std::move(bytes)},
          {"logprob", std::isfinite(logprob) ? static_cast<double>(logprob) : kLogprobFloor}};
}

}  // namespace

std::string ReplyLogprobsJson(const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& logprobs,
                              const TokenTextFn& token_text) {
  Json content = Json::array();
  for (const v1::TokenLogprob& token : logprobs) {
    Json entry = Entry(token.token_id(), token.logprob(), token_text);
    Json top = Json::array();
    for (const v1::TopLogprob& alternative : token.top_logprobs()) {
      top.push_back(Entry(alternative.token_id(), alternative.logprob(), token_text));
    }
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  const Json object = {{"content", std::move(content)}};
  return object.dump(-1, ' ', false, Json::error_handler_t::replace);
}

ReplyBuilder::ReplyBuilder(int prompt_tokens, bool logprobs, TokenTextFn token_text,
                           Clock::time_point start)
    : prompt_tokens_(prompt_tokens),
      logprobs_(logprobs),
      token_text_(std::move(token_text)),
      start_(start) {}

::backend::Reply ReplyBuilder::Next(const v1::GenerateResponse& response, bool closed) {
  tokens_ += response.token_ids_size();
  if (closed && response.has_usage()) {
    tokens_ = static_cast<int>(response.usage().completion_tokens());
  }
  const Clock::time_point now = Clock::now();
  if (!first_token_.has_value() && tokens_ > 0) first_token_ = now;
  ::backend::Reply reply;
  reply.set_message(response.text());
  reply.set_tokens(tokens_);
  reply.set_prompt_tokens(prompt_tokens_);
  reply.set_timing_prompt_processing(MillisSince(start_, first_token_.value_or(now)));
  reply.set_timing_token_generation(first_token_.has_value() ? MillisSince(*first_token_, now)
                                                             : 0);
  if (logprobs_ && response.logprobs_size() > 0) {
    reply.set_logprobs(ReplyLogprobsJson(response.logprobs(), token_text_));
    logprobs_so_far_.MergeFrom(response.logprobs());
  }
  text_ += response.text();
  last_ = reply;
  return reply;
}

::backend::Reply ReplyBuilder::Whole() const {
  ::backend::Reply whole = last_;
  whole.set_message(text_);
  whole.clear_logprobs();
  if (logprobs_) whole.set_logprobs(ReplyLogprobsJson(logprobs_so_far_, token_text_));
  return whole;
}

}  // namespace tessera::router::localai
