// What tessera-localai puts in LocalAI's Reply, MetricsResponse and ModelMetadataResponse
// (router/localai/reply_builder.h, backend_reports.h): the logprobs JSON LocalAI's Go side
// unmarshals (shape, bytes of a partial UTF-8 character, a -inf logprob), per-Reply and
// whole-answer logprobs, the metrics summed over workers, and the thinking probe of a template.
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "router/localai/backend_reports.h"
#include "router/localai/reply_builder.h"
#include "router/router_metrics.h"

namespace tessera::router::localai {
namespace {

using Json = nlohmann::json;
namespace v1 = ::tessera::v1;

// Token i's text: "t<i>", and id 9 is half of "é" (0xC3).
std::string TokenText(int32_t id) {
  if (id == 9) return "\xC3";
  std::string text = "t";
  text += std::to_string(id);
  return text;
}

v1::TokenLogprob Token(int32_t id, float logprob, std::initializer_list<int32_t> top) {
  v1::TokenLogprob token;
  token.set_token_id(id);
  token.set_logprob(logprob);
  float alternative = logprob;
  for (const int32_t top_id : top) {
    v1::TopLogprob* out = token.add_top_logprobs();
    out->set_token_id(top_id);
    out->set_logprob(alternative);
    alternative -= 1.0f;
  }
  return token;
}

google::protobuf::RepeatedPtrField<v1::TokenLogprob> Tokens(
    std::initializer_list<v1::TokenLogprob> tokens) {
  google::protobuf::RepeatedPtrField<v1::TokenLogprob> out;
  for (const v1::TokenLogprob& token : tokens) *out.Add() = token;
  return out;
}

TEST(LocalAiReplyTest, LogprobsJsonIsOpenAiChatShape) {
  const auto tokens = Tokens({Token(3, -0.25f, {3, 4}), Token(9, -1.5f, {9, 5})});
  const Json json = Json::parse(ReplyLogprobsJson(tokens, TokenText));
  ASSERT_EQ(json["content"].size(), 2u);
  const Json& first = json["content"][0];
  EXPECT_EQ(first["id"], 3);
  EXPECT_EQ(first["token"], "t3");
  EXPECT_EQ(first["bytes"], Json::array({'t', '3'}));
  EXPECT_DOUBLE_EQ(first["logprob"].get<double>(), -0.25);
  ASSERT_EQ(first["top_logprobs"].size(), 2u);
  EXPECT_EQ(first["top_logprobs"][1]["id"], 4);
  EXPECT_EQ(first["top_logprobs"][1]["token"], "t4");
  EXPECT_DOUBLE_EQ(first["top_logprobs"][1]["logprob"].get<double>(), -1.25);
  EXPECT_FALSE(first["top_logprobs"][1].contains("top_logprobs"));
  const Json& half = json["content"][1];
  EXPECT_EQ(half["token"], "\xEF\xBF\xBD") << "invalid UTF-8 is replaced, not thrown";
  EXPECT_EQ(half["bytes"], Json::array({0xC3})) << "the exact byte stays in bytes";
}

TEST(LocalAiReplyTest, NonFiniteLogprobIsTheFloor) {
  const auto tokens = Tokens({Token(1, -std::numeric_limits<float>::infinity(), {}),
                              Token(2, std::nanf(""), {})});
  const Json json = Json::parse(ReplyLogprobsJson(tokens, TokenText));
  EXPECT_DOUBLE_EQ(json["content"][0]["logprob"].get<double>(), -9999.0);
  EXPECT_DOUBLE_EQ(json["content"][1]["logprob"].get<double>(), -9999.0);
  EXPECT_EQ(Json::parse(ReplyLogprobsJson(Tokens({}), TokenText)),
            Json({{"content", Json::array()}}));
}

v1::GenerateResponse Event(const std::string& text, int32_t id, float logprob) {
  v1::GenerateResponse response;
  response.set_text(text);
  response.add_token_ids(id);
  *response.add_logprobs() = Token(id, logprob, {id});
  return response;
}

TEST(LocalAiReplyTest, EachReplyHasItsTokensAndWholeHasAll) {
  ReplyBuilder builder(/*prompt_tokens=*/4, /*logprobs=*/true, TokenText);
  const ::backend::Reply first = builder.Next(Event("t1", 1, -0.5f), false);
  v1::GenerateResponse last = Event("t2", 2, -0.75f);
  last.mutable_usage()->set_completion_tokens(2);
  const ::backend::Reply second = builder.Next(last, true);
  EXPECT_EQ(first.message(), "t1");
  EXPECT_EQ(first.tokens(), 1);
  EXPECT_EQ(second.tokens(), 2);
  EXPECT_EQ(second.prompt_tokens(), 4);
  EXPECT_EQ(Json::parse(first.logprobs())["content"].size(), 1u);
  EXPECT_EQ(Json::parse(second.logprobs())["content"][0]["token"], "t2");
  const ::backend::Reply whole = builder.Whole();
  EXPECT_EQ(whole.message(), "t1t2");
  EXPECT_EQ(whole.tokens(), 2);
  const Json all = Json::parse(whole.logprobs());
  ASSERT_EQ(all["content"].size(), 2u);
  EXPECT_EQ(all["content"][0]["token"], "t1");
  EXPECT_EQ(all["content"][1]["token"], "t2");
}

TEST(LocalAiReplyTest, NoLogprobsAskedNoneSent) {
  ReplyBuilder builder(1, /*logprobs=*/false, TokenText);
  EXPECT_TRUE(builder.Next(Event("t1", 1, -0.5f), false).logprobs().empty());
  EXPECT_TRUE(builder.Whole().logprobs().empty());
}

TEST(LocalAiReportsTest, MetricsSumTheWorkers) {
  auto registry = std::make_shared<prometheus::Registry>();
  RouterMetrics zero(registry, {.worker = "0"});
  RouterMetrics one(registry, {.worker = "1"});
  EXPECT_EQ(MetricsOf(*registry).tokens_generated(), 0);
  EXPECT_EQ(MetricsOf(*registry).tokens_per_second(), 0.0f) << "no gap between tokens yet";
  zero.ObserveAdmitted(0.0, 7);
  one.ObserveAdmitted(0.0, 5);
  zero.ObserveToken(/*first=*/true, 0.5);
  zero.ObserveToken(false, 0.1);
  one.ObserveToken(true, 0.5);
  one.ObserveToken(false, 0.15);
  one.ObserveToken(false, 0.15);
  const ::backend::MetricsResponse metrics = MetricsOf(*registry);
  EXPECT_EQ(metrics.slot_id(), 0);
  EXPECT_EQ(metrics.prompt_json_for_slot(), "");
  EXPECT_EQ(metrics.prompt_tokens_processed(), 12);
  EXPECT_EQ(metrics.tokens_generated(), 5);
  EXPECT_NEAR(metrics.tokens_per_second(), 3 / 0.4, 1e-3) << "3 gaps in 0.4 s";
}

ModelFrontend WithTemplate(const std::string& source) {
  ModelFrontend frontend;
  absl::StatusOr<chat::ChatTemplate> parsed = chat::ChatTemplate::FromSource(source);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (parsed.ok()) frontend.chat_template = *std::move(parsed);
  return frontend;
}

TEST(LocalAiReportsTest, ThinkingSwitchIsSupportedThinking) {
  const ModelFrontend frontend = WithTemplate(
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>"
      "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
      "{% endif %}");
  const ::backend::ModelMetadataResponse metadata = ModelMetadataOf(frontend);
  EXPECT_TRUE(metadata.supports_thinking());
  EXPECT_EQ(metadata.rendered_template(), "<|user|>test\n<|assistant|>")
      << "rendered with enable_thinking = true";
}

TEST(LocalAiReportsTest, PlainTemplateDoesNotThink) {
  const ::backend::ModelMetadataResponse metadata = ModelMetadataOf(WithTemplate(
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}"));
  EXPECT_FALSE(metadata.supports_thinking());
  EXPECT_EQ(metadata.rendered_template(), "<|user|>test\n<|assistant|>");
  const ::backend::ModelMetadataResponse none = ModelMetadataOf(ModelFrontend{});
  EXPECT_FALSE(none.supports_thinking());
  EXPECT_EQ(none.rendered_template(), "") << "no template: nothing rendered";
}

TEST(LocalAiReportsTest, TemplateThatRefusesRendersNothing) {
  const ::backend::ModelMetadataResponse metadata = ModelMetadataOf(
      WithTemplate("{{ raise_exception('no chats here') }}"));
  EXPECT_FALSE(metadata.supports_thinking());
  EXPECT_EQ(metadata.rendered_template(), "");
}

}  // namespace
}  // namespace tessera::router::localai
