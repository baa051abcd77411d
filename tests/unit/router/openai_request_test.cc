// OpenAI request parsing (router/openai/openai_request.h): every supported field lands in the
// GenerateRequest, defaults follow OpenAI/vLLM, and bad input is INVALID_ARGUMENT naming the
// field. Plus the error object and status mapping of openai_response.h.
#include "router/openai/openai_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "router/openai/openai_response.h"

namespace tessera::router::openai {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

absl::StatusOr<OpenAiRequest> Completions(const std::string& body) {
  return ParseGenerationRequest(Endpoint::kCompletions, body);
}

absl::StatusOr<OpenAiRequest> Chat(const std::string& body) {
  return ParseGenerationRequest(Endpoint::kChatCompletions, body);
}

TEST(OpenAiRequestTest, CompletionsFieldsReachTheGenerateRequest) {
  absl::StatusOr<OpenAiRequest> r = Completions(R"({
      "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
      "seed": 42, "stop": ["a", "b"], "n": 3, "logprobs": 2, "presence_penalty": 0.25,
      "frequency_penalty": -0.5, "top_k": 5, "min_p": 0.1, "repetition_penalty": 1.2,
      "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true},
      "user": "ignored"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->generate.text(), "Hello");
  EXPECT_EQ(r->generate.max_tokens(), 7u);
  const ::tessera::v1::SamplingParams& s = r->generate.sampling();
  EXPECT_FLOAT_EQ(s.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_EQ(s.seed(), 42u);
  EXPECT_FLOAT_EQ(s.presence_penalty(), 0.25f);
  EXPECT_FLOAT_EQ(s.frequency_penalty(), -0.5f);
  EXPECT_EQ(s.top_k(), 5);
  EXPECT_FLOAT_EQ(s.min_p(), 0.1f);
  EXPECT_FLOAT_EQ(s.repetition_penalty(), 1.2f);
  EXPECT_THAT(r->generate.stop(), ElementsAre("a", "b"));
  EXPECT_EQ(r->n, 3);
  EXPECT_TRUE(r->logprobs);
  EXPECT_TRUE(r->generate.logprobs());
  EXPECT_EQ(r->generate.top_logprobs(), 2u);
  EXPECT_TRUE(r->generate.ignore_eos());
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

TEST(OpenAiRequestTest, Defaults) {
  absl::StatusOr<OpenAiRequest> completion = Completions(R"({"prompt": "Hi"})");
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_EQ(completion->generate.max_tokens(), kCompletionsDefaultMaxTokens);
  EXPECT_FALSE(completion->generate.sampling().has_temperature());
  EXPECT_EQ(completion->n, 1);
  EXPECT_FALSE(completion->stream);
  EXPECT_TRUE(completion->generate.skip_special_tokens());
  absl::StatusOr<OpenAiRequest> chat = Chat(R"({"messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_FALSE(chat->generate.has_max_tokens()) << "chat: the router's default";
}

TEST(OpenAiRequestTest, PromptForms) {
  absl::StatusOr<OpenAiRequest> ids = Completions(R"({"prompt": [1, 2, 3]})");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(ids->generate.token_ids().ids(), ElementsAre(1, 2, 3));
  absl::StatusOr<OpenAiRequest> nested = Completions(R"({"prompt": [[4, 5]]})");
  ASSERT_TRUE(nested.ok());
  EXPECT_THAT(nested->generate.token_ids().ids(), ElementsAre(4, 5));
  absl::StatusOr<OpenAiRequest> one = Completions(R"({"prompt": ["text"]})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->generate.text(), "text");
  EXPECT_THAT(Message(Completions(R"({"prompt": ["a", "b"]})").status()),
              HasSubstr("one request per prompt"));
}

TEST(OpenAiRequestTest, ChatMessagesAndLogprobs) {
  absl::StatusOr<OpenAiRequest> r = Chat(R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
      "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3, "stop": "END"})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->generate.chat().messages_size(), 2);
  EXPECT_EQ(r->generate.chat().messages(0).role(), "system");
  EXPECT_EQ(r->generate.chat().messages(1).content(), "Hi there");
  EXPECT_EQ(r->generate.max_tokens(), 9u);
  EXPECT_TRUE(r->generate.logprobs());
  EXPECT_EQ(r->generate.top_logprobs(), 3u);
  EXPECT_THAT(r->generate.stop(), ElementsAre("END"));
}

// Tools, tool calls, tool results, a null content and chat_template_kwargs reach the Chat the
// template renders, tools keeping the client's key order (a template prints them with tojson).
TEST(OpenAiRequestTest, ToolsToolCallsAndTemplateKwargs) {
  absl::StatusOr<OpenAiRequest> r = Chat(R"({
    "messages": [
      {"role": "user", "content": "Weather in Lyon?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Lyon\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "rain"}],
    "tools": [{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"zeta": {}, "alpha": {}}}}}],
    "tool_choice": "auto",
    "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::Chat& chat = r->generate.chat();
  ASSERT_EQ(chat.messages_size(), 3);
  EXPECT_EQ(chat.messages(1).content(), "");
  EXPECT_THAT(chat.messages(1).tool_calls_json(), HasSubstr("\"name\":\"get_weather\""));
  EXPECT_EQ(chat.messages(2).tool_call_id(), "call_1");
  EXPECT_EQ(chat.messages(2).name(), "get_weather");
  EXPECT_THAT(chat.tools_json(), HasSubstr("\"zeta\":{},\"alpha\":{}"));
  EXPECT_EQ(chat.template_kwargs_json(), "{\"enable_thinking\":false}");
  // tool_choice "none": the template gets no tools ("required" without tools: see below).
  r = Chat(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none",
               "tools": [{"type": "function", "function": {"name": "f"}}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.chat().tools_json(), "");
  r = Chat(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})");
  EXPECT_THAT(std::string(r.status().message()), StartsWith("tool_choice \"required\" needs"));
  r = Chat(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})");
  EXPECT_THAT(std::string(r.status().message()), StartsWith("tools[0].function.name must be a string"));
  r = Chat(R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "a"}]}]})");
  EXPECT_THAT(std::string(r.status().message()), StartsWith("messages[0].tool_calls[0].function is required"));
  r = Chat(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]})");
  EXPECT_THAT(std::string(r.status().message()), StartsWith("chat_template_kwargs must be an object"));
}

TEST(OpenAiRequestTest, BadInputNamesTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": "x", "temperature": "hot"})", "temperature "},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens "},
      {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens "},
      {R"({"prompt": "x", "n": 0})", "n "},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs "},
      {R"({"prompt": "x", "stop": 3})", "stop "},
      {R"({"prompt": "x", "logit_bias": {"five": 1}})", "logit_bias "},
      {R"({"prompt": "x", "logit_bias": {"5": "up"}})", "logit_bias "},
      {R"({"prompt": "x", "logit_bias": [5]})", "logit_bias "},
      {R"({"prompt": "x", "echo": true, "logprobs": 1})", "echo "},
      {R"({"prompt": "x", "echo": 1})", "echo "},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options "},
      {R"({"prompt": "x", "seed": "s"})", "seed "},
      {R"({"prompt": [1, -2]})", "prompt "},
      {R"({"temperature": 1})", "prompt "},
      {R"([1, 2])", "body "},
      {R"({"prompt": )", "body "},
  };
  for (const auto& [body, prefix] : cases) {
    absl::Status status = Completions(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(Message(status), StartsWith(prefix)) << body;
  }
  EXPECT_THAT(Message(Chat(R"({"messages": []})").status()), StartsWith("messages "));
  EXPECT_THAT(Message(Chat(R"({"messages": [{"content": "x"}]})").status()),
              StartsWith("messages[0].role "));
  EXPECT_THAT(
      Message(
          Chat(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})").status()),
      StartsWith("top_logprobs "));
}

// A field the server cannot honour is refused naming it, never ignored; null counts as absent.
TEST(OpenAiRequestTest, FieldsNotHonouredAreRefusedNamingThem) {
  const std::pair<const char*, const char*> completions[] = {
      {R"({"prompt": "x", "min_tokens": 3})", "min_tokens is not supported"},
      {R"({"prompt": "x", "suffix": "y"})", "suffix is not supported"},
      {R"({"prompt": "x", "best_of": 2})", "best_of is not supported by this server (use n)"},
      {R"({"prompt": "x", "top_logprobs": 2})", "top_logprobs is not supported"},
      {R"({"prompt": "x", "messages": []})", "messages is not supported"},
      {R"({"prompt": "x", "store": true})", "store is not supported"},
      {R"({"prompt": "x", "a": 1, "b": 2})", "a is not supported by this server; nor are b."},
      {R"({"prompt": "x", "stream": true, "stream_options": {"continuous_usage_stats": true}})",
       "stream_options.continuous_usage_stats is not supported"},
  };
  for (const auto& [body, prefix] : completions) {
    const absl::Status status = Completions(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(Message(status), StartsWith(prefix)) << body;
  }
  const std::pair<const char*, const char*> chats[] = {
      {R"({"messages": [{"role": "user", "content": "x"}], "functions": [{"name": "f"}]})",
       "functions is not supported by this server (use tools and tool_choice)"},
      {R"({"messages": [{"role": "user", "content": "x"}], "prompt": "y"})", "prompt is not"},
      {R"({"messages": [{"role": "user", "content": "x", "audio": {"id": "a"}}]})",
       "messages[0].audio is not supported"},
  };
  for (const auto& [body, prefix] : chats) {
    const absl::Status status = Chat(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(Message(status), StartsWith(prefix)) << body;
  }
  EXPECT_EQ(ErrorBody(Completions(R"({"prompt": "x", "min_tokens": 3})").status())["error"]["param"],
            "min_tokens");
  // Accepted: nulls, best_of 1, store false, user, and output-only keys echoed in messages.
  EXPECT_TRUE(Completions(R"({"prompt": "x", "min_tokens": null, "best_of": 1, "store": false,
                              "user": "u"})").ok());
  const absl::StatusOr<OpenAiRequest> echoed = Chat(R"({"messages": [
      {"role": "user", "content": "x"},
      {"role": "assistant", "content": "y", "refusal": null, "annotations": [], "audio": null},
      {"role": "user", "content": "z"}], "parallel_tool_calls": false})");
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_FALSE(echoed->parallel_tool_calls);
}

// response_format and vLLM's guided_* fields become the request's one structured constraint
// (parsed later, in BuildRequest); the field that set it is remembered for the 400.
TEST(OpenAiRequestTest, StructuredOutputFields) {
  const std::string chat = R"("messages": [{"role": "user", "content": "x"}])";
  absl::StatusOr<OpenAiRequest> r = Chat("{" + chat + R"(, "response_format": {"type":
      "json_schema", "json_schema": {"name": "p", "strict": true, "schema": {"type": "object",
      "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}}}})");
  ASSERT_TRUE(r.ok()) << r.status();
  // The client's key order survives (property order is the output's order).
  EXPECT_EQ(r->generate.structured().json_schema(),
            R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}})");
  EXPECT_EQ(r->structured_field, "response_format");
  r = Chat("{" + chat + R"(, "response_format": {"type": "json_object"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->generate.structured().json_object());
  r = Chat("{" + chat + R"(, "response_format": {"type": "text"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->generate.has_structured());
  r = Completions(R"({"prompt": "x", "guided_choice": ["a", "b c"]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->generate.structured().choice().values(), ElementsAre("a", "b c"));
  EXPECT_EQ(r->structured_field, "guided_choice");
  r = Completions(R"({"prompt": "x", "guided_json": "{\"type\": \"string\"}"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.structured().json_schema(), R"({"type": "string"})");
  r = Completions(R"({"prompt": "x", "guided_regex": "[0-9]+"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.structured().regex(), "[0-9]+");
  r = Completions(R"({"prompt": "x", "structured_outputs": {"regex": "[a-z]+"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.structured().regex(), "[a-z]+");
  EXPECT_EQ(r->structured_field, "structured_outputs");
  r = Completions(R"({"prompt": "x", "structured_outputs": {"json": {"type": "integer"}}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.structured().json_schema(), R"({"type":"integer"})");
  r = Completions(R"({"prompt": "x", "structured_outputs": {"choice": ["a", "b"]}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->generate.structured().choice().values(), ElementsAre("a", "b"));
  r = Completions(R"({"prompt": "x", "guided_grammar": "root ::= \"a\""})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.structured().grammar(), R"(root ::= "a")");

  const std::pair<const char*, const char*> bad[] = {
      {R"({"prompt": "x", "response_format": {"type": "yaml"}})", "response_format.type "},
      {R"({"prompt": "x", "response_format": {"type": "json_schema"}})",
       "response_format.json_schema "},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {}}})",
       "response_format.json_schema.schema "},
      {R"({"prompt": "x", "guided_choice": "a"})", "guided_choice "},
      {R"({"prompt": "x", "guided_choice": [1]})", "guided_choice "},
      {R"({"prompt": "x", "guided_regex": 5})", "guided_regex "},
      {R"({"prompt": "x", "guided_json": 5})", "guided_json "},
      {R"({"prompt": "x", "structured_outputs": {"xml": "a"}})", "structured_outputs "},
      {R"({"prompt": "x", "structured_outputs": {"regex": "a", "choice": ["a"]}})",
       "structured_outputs "},
      {R"({"prompt": "x", "structured_outputs": {"regex": 1}})", "structured_outputs.regex "},
      {R"({"prompt": "x", "guided_regex": "a", "guided_choice": ["a"]})", "guided_choice "},
      {R"({"prompt": "x", "response_format": {"type": "json_object"}, "guided_regex": "a"})",
       "guided_regex cannot be combined with response_format"},
  };
  for (const auto& [body, prefix] : bad) {
    absl::Status status = Completions(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(Message(status), StartsWith(prefix)) << body;
  }
}

// tool_choice "required" / a named function constrains the output to a call (vLLM's shape:
// the named function's arguments, or a list of {name, parameters}); the tools still reach the
// template.
TEST(OpenAiRequestTest, ForcedToolChoiceBecomesTheStructuredConstraint) {
  const std::string head = R"({"messages": [{"role": "user", "content": "x"}], "tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "now"}}])";
  absl::StatusOr<OpenAiRequest> r =
      Chat(head + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->forced_tool.has_value());
  EXPECT_EQ(r->forced_tool->function, "get_weather");
  EXPECT_EQ(r->generate.structured().json_schema(),
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  EXPECT_EQ(r->structured_field, "tool_choice");
  EXPECT_FALSE(r->generate.chat().tools_json().empty());

  r = Chat(head + R"(, "tool_choice": "required", "parallel_tool_calls": false})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->forced_tool.has_value());
  EXPECT_EQ(r->forced_tool->function, "");
  const nlohmann::json schema = nlohmann::json::parse(r->generate.structured().json_schema());
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_EQ(schema["maxItems"], 1);
  ASSERT_EQ(schema["items"]["anyOf"].size(), 2u);
  EXPECT_EQ(schema["items"]["anyOf"][1]["properties"]["name"]["enum"][0], "now");
  EXPECT_EQ(schema["items"]["anyOf"][1]["properties"]["parameters"]["type"], "object");

  r = Chat(head + R"(, "tool_choice": "none"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->forced_tool.has_value());
  EXPECT_FALSE(r->generate.has_structured());
  EXPECT_TRUE(r->generate.chat().tools_json().empty());

  const std::pair<std::string, const char*> bad[] = {
      {head + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}}})",
       "tool_choice names the function \"nope\""},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
       "tool_choice \"required\" needs"},
      {head + R"(, "tool_choice": "sometimes"})", "tool_choice must be"},
      {head + R"(, "tool_choice": "required", "response_format": {"type": "json_object"}})",
       "tool_choice forces a tool call; it cannot be combined with response_format"},
  };
  for (const auto& [body, prefix] : bad) {
    absl::Status status = Chat(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(Message(status), StartsWith(prefix)) << body;
  }
}

TEST(OpenAiRequestTest, EchoIsForCompletions) {
  absl::StatusOr<OpenAiRequest> r = Completions(R"({"prompt": "x", "echo": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->echo);
  EXPECT_THAT(Message(Chat(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})")
                          .status()),
              StartsWith("echo is for /v1/completions only"));
}

TEST(OpenAiRequestTest, TokenizeAndDetokenize) {
  absl::StatusOr<::tessera::v1::TokenizeRequest> text =
      ParseTokenizeRequest(R"({"prompt": "hi", "add_special_tokens": false})");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->text(), "hi");
  EXPECT_FALSE(text->add_special_tokens());
  absl::StatusOr<::tessera::v1::TokenizeRequest> chat =
      ParseTokenizeRequest(R"({"messages": [{"role": "user", "content": "q"}]})");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->chat().messages(0).content(), "q");
  EXPECT_THAT(ParseDetokenizeRequest(R"({"tokens": [7, 8]})").value(), ElementsAre(7, 8));
  EXPECT_THAT(Message(ParseDetokenizeRequest(R"({"tokens": "7"})").status()),
              StartsWith("tokens "));
}

// `depth` containers opened by `open` around `inner` and closed by `close`.
std::string Nested(int depth, const std::string& open, const std::string& inner,
                   const std::string& close) {
  std::string out;
  out.reserve(depth * (open.size() + close.size()) + inner.size());
  for (int i = 0; i < depth; ++i) out += open;
  out += inner;
  for (int i = 0; i < depth; ++i) out += close;
  return out;
}

// 60,000 nested arrays (a 120 kB body) once overflowed the router's stack in the recursive prompt
// parser and killed the process; any field that nests too deep is now a 400 naming the field.
TEST(OpenAiRequestTest, DeepPromptIsRefusedNamingTheField) {
  const std::string body = "{\"prompt\": " + Nested(60000, "[", "1", "]") + "}";
  const absl::Status status = Completions(body).status();
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(Message(status), StartsWith("prompt nests deeper than 64 levels"));
  EXPECT_EQ(HttpStatusOf(status), 400);
  EXPECT_EQ(ErrorBody(status)["error"]["param"], "prompt");
}

TEST(OpenAiRequestTest, DeepValueInAnyFieldIsRefusedNamingTheField) {
  const std::string deep_object = Nested(60000, "{\"a\": ", "1", "}");
  const std::string deep_array = Nested(60000, "[", "1", "]");
  const std::pair<std::string, const char*> completions[] = {
      {R"({"prompt": "x", "logit_bias": )" + deep_object + "}", "logit_bias "},
      {R"({"prompt": "x", "stop": )" + deep_array + "}", "stop "},
      {R"({"prompt": "x", "user": )" + deep_object + "}", "user "},  // informational too
  };
  for (const auto& [body, field] : completions) {
    const absl::Status status = Completions(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(Message(status), StartsWith(std::string(field) + "nests deeper than 64 levels"));
  }
  const std::string messages =
      R"({"messages": [{"role": "user", "content": )" + deep_array + "}]}";
  EXPECT_THAT(Message(Chat(messages).status()), StartsWith("messages nests deeper than 64"));
  EXPECT_THAT(Message(ParseTokenizeRequest(messages).status()),
              StartsWith("messages nests deeper than 64"));
  EXPECT_THAT(Message(ParseDetokenizeRequest(R"({"tokens": )" + deep_array + "}").status()),
              StartsWith("tokens nests deeper than 64"));
  EXPECT_THAT(Message(Completions(deep_array).status()), StartsWith("body nests deeper than 64"));
}

// The cap counts the body's own object: 64 levels in all parse, 65 do not.
TEST(OpenAiRequestTest, NestingUpToTheCapStillParses) {
  const absl::StatusOr<OpenAiRequest> at_cap =
      Completions(R"({"prompt": [[4, 5]], "user": )" + Nested(63, "[", "1", "]") + "}");
  ASSERT_TRUE(at_cap.ok()) << at_cap.status();
  EXPECT_THAT(at_cap->generate.token_ids().ids(), ElementsAre(4, 5));
  EXPECT_THAT(Message(Completions(R"({"prompt": "x", "user": )" + Nested(64, "[", "1", "]") + "}")
                          .status()),
              StartsWith("user nests deeper than 64 levels"));
}

// The prompt schema itself allows one level of wrapping ([[ids]] or ["text"]), no more.
TEST(OpenAiRequestTest, PromptWrappedTwiceIsRefused) {
  for (const char* body : {R"({"prompt": [[[1]]]})", R"({"prompt": [["text"]]})"}) {
    const absl::Status status = Completions(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(Message(status), StartsWith("prompt ")) << body;
  }
}

TEST(OpenAiResponseTest, ErrorObjectsAndStatuses) {
  EXPECT_EQ(HttpStatusOf(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(HttpStatusOf(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(HttpStatusOf(absl::NotFoundError("x")), 404);
  EXPECT_EQ(HttpStatusOf(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpStatusOf(absl::UnavailableError("x")), 503);
  EXPECT_EQ(HttpStatusOf(absl::InternalError("x")), 500);
  const nlohmann::json bad = ErrorBody(absl::InvalidArgumentError("sampling.top_p must be ..."));
  EXPECT_EQ(bad["error"]["param"], "top_p");
  EXPECT_EQ(bad["error"]["type"], "invalid_request_error");
  EXPECT_EQ(bad["error"]["message"], "top_p must be ...") << "without the public API prefix";
  EXPECT_TRUE(
      ErrorBody(absl::InvalidArgumentError("the prompt is empty"))["error"]["param"].is_null());
  const nlohmann::json missing = ErrorBody(absl::NotFoundError("model 'x' does not exist"));
  EXPECT_EQ(missing["error"]["code"], "model_not_found");
  EXPECT_EQ(ErrorBody(absl::ResourceExhaustedError("full"))["error"]["type"], "rate_limit_error");
  EXPECT_EQ(SseEvent({{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(Dump(nlohmann::json(std::string("\xff"))), "\"\xEF\xBF\xBD\"") << "U+FFFD";
}

}  // namespace
}  // namespace tessera::router::openai
