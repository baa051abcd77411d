// ToolCallParser (router/openai/tool_call_parser.h): the tool calls in a model's output for each
// format, the same whatever the deltas (every two-cut split), text around calls kept as content,
// malformed calls given back as content; the format chosen from real templates; the chat
// encoder's tool_calls, streaming and not, with finish_reason "tool_calls".
#include "router/openai/tool_call_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "router/openai/openai_response.h"

namespace tessera::router::openai {
namespace {

using chat::ToolCallFormat;

struct Case {
  ToolCallFormat format;
  std::string text;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  std::string tools = {};  // the request's tools (kQwenXml types values by their schemas)
};

// A schema for the XML cases: each type the format converts.
constexpr char kWeatherTools[] = R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
  "days": {"type": "integer"}, "metric": {"type": "boolean"}, "ratio": {"type": ["number", "null"]},
  "where": {"type": "object"}, "note": {"type": "string"}}}}}])";

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {ToolCallFormat::kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call>",
       "Let me check.\n", {{"get_weather", "{\"city\":\"Lyon\"}"}}},
      {ToolCallFormat::kHermes,
       "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", "
       "\"arguments\": {\"x\": [1, 2]}}</tool_call>",
       "\n", {{"a", "{}"}, {"b", "{\"x\":[1,2]}"}}},
      {ToolCallFormat::kHermes, "<tool_call>not json</tool_call> ok",
       "<tool_call>not json</tool_call> ok", {}},
      {ToolCallFormat::kHermes, "no calls, a < sign and <tool", "no calls, a < sign and <tool", {}},
      {ToolCallFormat::kHermes, "cut off <tool_call>{\"name\": ", "cut off <tool_call>{\"name\": ", {}},
      // A client's stop string "</tool_call>" ends the output before the closing tag.
      {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"a\", \"arguments\": {}}", "", {{"a", "{}"}}},
      {ToolCallFormat::kQwenXml,
       "I'll look.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nLyon\n</parameter>\n"
       "<parameter=days>\n2\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n"
       "<parameter=ratio>\n0.5\n</parameter>\n<parameter=note>\nline one\nline two\n</parameter>\n"
       "<parameter=where>\n{\"lat\": 45.7}\n</parameter>\n</function>\n</tool_call>",
       "I'll look.\n\n",
       {{"get_weather", R"({"city":"Lyon","days":2,"metric":true,"ratio":0.5,"note":"line one\nline two","where":{"lat":45.7}})"}},
       kWeatherTools},
      // Values that do not parse as their type stay text; null is null; unknown names are text;
      // a forgotten </parameter> ends at the next parameter; two calls.
      {ToolCallFormat::kQwenXml,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n"
       "<parameter=days>\nthree\n<parameter=ratio>\nnull\n</parameter>\n<parameter=extra>\n7\n"
       "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=now>\n</function>\n</tool_call>",
       "\n",
       {{"get_weather", R"({"city":"42","days":"three","ratio":null,"extra":"7"})"}, {"now", "{}"}},
       kWeatherTools},
      {ToolCallFormat::kQwenXml, "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
       "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", {}, kWeatherTools},
      {ToolCallFormat::kQwenXml, "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>",
       "", {{"f", R"({"x":"1"})"}}},
      {ToolCallFormat::kQwenXml, "<tool_call>\n<function=f>\n<parameter=x", "<tool_call>\n<function=f>\n<parameter=x", {}},
      {ToolCallFormat::kMistral,
       "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}, {\"name\": \"neg\", "
       "\"arguments\": {\"a\": 1}}]",
       "", {{"add", "{\"a\":2,\"b\":3}"}, {"neg", "{\"a\":1}"}}},
      {ToolCallFormat::kMistral, "Sure: [TOOL_CALLS] later", "Sure: [TOOL_CALLS] later", {}},
      {ToolCallFormat::kLlama3Json, " {\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}",
       "", {{"get_time", "{\"tz\":\"UTC\"}"}}},
      {ToolCallFormat::kLlama3Json, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "",
       {{"f", "{}"}}},
      {ToolCallFormat::kLlama3Json, "{\"not\": \"a call\"}", "{\"not\": \"a call\"}", {}},
      {ToolCallFormat::kLlama3Json, "Hello {\"name\": \"x\"}", "Hello {\"name\": \"x\"}", {}},
      {ToolCallFormat::kNone, "<tool_call>{\"name\": \"a\"}</tool_call>",
       "<tool_call>{\"name\": \"a\"}</tool_call>", {}},
  };
  return cases;
}

ToolCallParser::Output FeedCut(const Case& c, size_t i, size_t j) {
  ToolCallParser parser(ToolCallMode{.format = c.format, .tools_json = c.tools});
  ToolCallParser::Output all;
  size_t at = 0;
  for (size_t cut : {i, j, c.text.size()}) {
    ToolCallParser::Output o = parser.Feed(std::string_view(c.text).substr(at, cut - at));
    all.content += o.content;
    all.calls.insert(all.calls.end(), o.calls.begin(), o.calls.end());
    at = cut;
  }
  ToolCallParser::Output rest = parser.Finish();
  all.content += rest.content;
  all.calls.insert(all.calls.end(), rest.calls.begin(), rest.calls.end());
  return all;
}

void ExpectCalls(const ToolCallParser::Output& out, const Case& c, const std::string& where) {
  ASSERT_EQ(out.content, c.content) << c.text << where;
  ASSERT_EQ(out.calls.size(), c.calls.size()) << c.text << where;
  for (size_t k = 0; k < c.calls.size(); ++k) {
    EXPECT_EQ(out.calls[k].name, c.calls[k].first) << c.text;
    EXPECT_EQ(out.calls[k].arguments, c.calls[k].second) << c.text;
  }
}

TEST(ToolCallParserTest, EveryFormatAndEverySplitGivesTheSameCalls) {
  for (const Case& c : Cases()) {
    ExpectCalls(ToolCallParser::ParseAll({.format = c.format, .tools_json = c.tools}, c.text), c, "");
    for (size_t i = 0; i <= c.text.size(); ++i) {
      for (size_t j = i; j <= c.text.size(); j += 3) {
        ExpectCalls(FeedCut(c, i, j), c, " cut at " + std::to_string(i) + ", " + std::to_string(j));
      }
    }
  }
}

// tool_choice forced a call: the whole output is the grammar's JSON, whatever the template's
// format; held to the end (nothing streams before), as content when it does not parse.
TEST(ToolCallParserTest, ForcedCallsAreTheWholeOutput) {
  const ToolCallMode named{.forced = true, .forced_function = "get_weather"};
  const ToolCallMode required{.format = ToolCallFormat::kHermes, .forced = true};
  ToolCallParser parser(named);
  EXPECT_EQ(parser.Feed(" {\"city\": ").content, "");
  EXPECT_EQ(parser.Feed("\"Lyon\"}").content, "");
  ToolCallParser::Output out = parser.Finish();
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Lyon"})");
  EXPECT_EQ(out.content, "");

  out = ToolCallParser::ParseAll(
      required, R"([{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}])");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "a");
  EXPECT_EQ(out.calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(out.calls[1].name, "b");

  out = ToolCallParser::ParseAll(named, R"({"city": "Ly)");  // cut short by max_tokens
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, R"({"city": "Ly)");
  out = ToolCallParser::ParseAll(required, "<tool_call>{\"name\": \"a\"}</tool_call>");
  EXPECT_TRUE(out.calls.empty()) << "forced output is JSON, never the template's markup";
}

TEST(ToolCallParserTest, TheFormatComesFromTheTemplate) {
  for (auto [name, format] :
       {std::pair{"qwen3.jinja", ToolCallFormat::kHermes},
        std::pair{"qwen3_6.jinja", ToolCallFormat::kQwenXml},
        std::pair{"llama3_2_instruct.jinja", ToolCallFormat::kLlama3Json},
        std::pair{"mistral_nemo_instruct_2407.jinja", ToolCallFormat::kMistral},
        std::pair{"qwen2_5_instruct.jinja", ToolCallFormat::kHermes},
        std::pair{"mistral_small_3_1.jinja", ToolCallFormat::kMistral},
        std::pair{"smollm2_instruct.jinja", ToolCallFormat::kNone}}) {
    std::ifstream in(std::string("tests/data/chat/") + name);
    std::stringstream source;
    source << in.rdbuf();
    absl::StatusOr<chat::ChatTemplate> t = chat::ChatTemplate::FromSource(source.str());
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_EQ(t->tool_call_format(), format) << name;
  }
}

TEST(ToolCallParserTest, ChatResponsesCarryToolCalls) {
  ResponseEncoder encoder(Endpoint::kChatCompletions, "req", "m", 0, nullptr, false, false,
                          chat::ReasoningFormat::kNone, ToolCallMode{.format = ToolCallFormat::kHermes});
  v1::GenerateResponse delta;
  delta.set_text("Checking. <tool_c");
  nlohmann::json chunk = encoder.Chunk(0, delta, true);
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "Checking. ");
  delta.set_text("all>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>");
  delta.set_finish_reason(v1::FINISH_REASON_EOS);
  chunk = encoder.Chunk(0, delta, false);
  const nlohmann::json& call = chunk["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(call["index"], 0);
  EXPECT_EQ(call["function"]["name"], "f");
  EXPECT_EQ(call["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(chunk["choices"][0]["finish_reason"], "tool_calls");

  const nlohmann::json body = encoder.Complete(
      {ChoiceResult{.text = "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>",
                    .finish_reason = v1::FINISH_REASON_EOS}});
  EXPECT_TRUE(body["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(body["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "g");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
}

// parallel_tool_calls false: only the first call is returned, streamed or whole.
TEST(ToolCallParserTest, OneCallWhenParallelCallsAreOff) {
  ResponseEncoder encoder(Endpoint::kChatCompletions, "req", "m", 0, nullptr, false, false,
                          chat::ReasoningFormat::kNone,
                          ToolCallMode{.format = ToolCallFormat::kHermes, .max_calls = 1});
  const std::string two_calls =
      "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"
      "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
  v1::GenerateResponse delta;
  delta.set_text(two_calls.substr(0, 50));
  nlohmann::json first = encoder.Chunk(0, delta, true);
  delta.set_text(two_calls.substr(50));
  delta.set_finish_reason(v1::FINISH_REASON_EOS);
  nlohmann::json second = encoder.Chunk(0, delta, false);
  size_t streamed = 0;
  for (const nlohmann::json* chunk : {&first, &second}) {
    const nlohmann::json& d = (*chunk)["choices"][0]["delta"];
    if (d.contains("tool_calls")) streamed += d["tool_calls"].size();
  }
  EXPECT_EQ(streamed, 1u);
  const nlohmann::json body = encoder.Complete(
      {ChoiceResult{.text = two_calls, .finish_reason = v1::FINISH_REASON_EOS}});
  ASSERT_EQ(body["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "f");
}

}  // namespace
}  // namespace tessera::router::openai
