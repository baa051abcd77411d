#include "common/chat/chat_template.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::chat {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::string_view kSmolSystem =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
constexpr std::string_view kQwenSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

// Templates are stored as the exact bytes models ship (tests run from the repository root).
std::string ReadTemplate(const std::string& name) {
  std::ifstream in("tests/data/chat/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing tests/data/chat/" << name;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

ChatTemplate MustLoad(const std::string& name) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(ReadTemplate(name));
  EXPECT_TRUE(t.ok()) << name << ": " << t.status();
  if (!t.ok()) std::abort();
  return *std::move(t);
}

std::string MustApply(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool gen) {
  absl::StatusOr<std::string> prompt = t.Apply(messages, gen);
  EXPECT_TRUE(prompt.ok()) << prompt.status();
  return prompt.ok() ? *prompt : "";
}

TEST(ChatTemplateTest, RecognizesSmolLm2WithItsDefaultSystemPrompt) {
  ChatTemplate t = MustLoad("smollm2_instruct.jinja");
  EXPECT_EQ(t.shape(), "chatml-default-system");
  ASSERT_TRUE(t.has_default_system_prompt());
  EXPECT_EQ(*t.default_system_prompt(), kSmolSystem);
}

TEST(ChatTemplateTest, SmolLm2SingleUserMessage) {
  ChatTemplate t = MustLoad("smollm2_instruct.jinja");
  EXPECT_EQ(MustApply(t, {{"user", "What is the capital of France?"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(MustApply(t, {{"user", "Hi"}}, false),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateTest, SmolLm2GivenSystemReplacesTheDefault) {
  ChatTemplate t = MustLoad("smollm2_instruct.jinja");
  EXPECT_EQ(MustApply(t, {{"system", "Be terse."}, {"user", "Hi"}}, true),
            "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, SmolLm2MultiTurn) {
  ChatTemplate t = MustLoad("smollm2_instruct.jinja");
  std::vector<ChatMessage> messages = {
      {"user", "Hi"}, {"assistant", "Hello! How can I help?"}, {"user", " 2+2? \n"}};
  const std::string turns =
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
      "<|im_start|>user\n 2+2? \n<|im_end|>\n";
  const std::string system = "<|im_start|>system\n" + std::string(kSmolSystem) + "<|im_end|>\n";
  EXPECT_EQ(MustApply(t, messages, true), system + turns + "<|im_start|>assistant\n");
  EXPECT_EQ(MustApply(t, messages, false), system + turns);
  // Ending on an assistant turn (continuation) is allowed, as the template allows it.
  messages.push_back({"assistant", ""});
  EXPECT_EQ(MustApply(t, messages, false), system + turns + "<|im_start|>assistant\n<|im_end|>\n");
}

TEST(ChatTemplateTest, PlainChatMlHasNoDefaultSystem) {
  ChatTemplate t = MustLoad("chatml.jinja");
  EXPECT_EQ(t.shape(), "chatml");
  EXPECT_FALSE(t.has_default_system_prompt());
  EXPECT_EQ(MustApply(t, {{"user", "Hi"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(MustApply(t, {{"system", "S"}, {"user", "U"}, {"assistant", "A"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
            "<|im_start|>assistant\nA<|im_end|>\n");
}

TEST(ChatTemplateTest, PlainChatMlWithGenerationPromptGuard) {
  std::string source =
      "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}"
      "{% endif %}" +
      ReadTemplate("chatml.jinja");
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(source);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), "chatml");
}

TEST(ChatTemplateTest, Qwen25) {
  ChatTemplate t = MustLoad("qwen2_5_instruct.jinja");
  EXPECT_EQ(t.shape(), "qwen2.5");
  ASSERT_TRUE(t.has_default_system_prompt());
  EXPECT_EQ(*t.default_system_prompt(), kQwenSystem);
  EXPECT_EQ(MustApply(t, {{"user", "Hi"}}, true),
            "<|im_start|>system\n" + std::string(kQwenSystem) +
                "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(MustApply(t, {{"system", "S"}, {"user", "U"}, {"assistant", "A"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
            "<|im_start|>assistant\nA<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen2StyleWithAnotherSystemPromptIsExtracted) {
  std::string source =
      absl::StrReplaceAll(ReadTemplate("smollm2_instruct.jinja"),
                          {{std::string(kSmolSystem), "You are a helpful assistant."}});
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(source);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->default_system_prompt(), "You are a helpful assistant.");
}

TEST(ChatTemplateTest, SpellingDifferencesAreRecognized) {
  // Same program as SmolLM2's: other quotes, \n escapes, .attr access, comments, whitespace
  // control and indentation (the oracle test confirms it renders the same with transformers).
  ChatTemplate t = MustLoad("chatml_default_system_respelled.jinja");
  EXPECT_EQ(t.shape(), "chatml-default-system");
  EXPECT_EQ(*t.default_system_prompt(), "Be kind.");
}

TEST(ChatTemplateTest, AnyTemplateRendersAndItsShapeIsOnlyALabel) {
  // `| trim` makes it another program than the known ChatML: it renders (trimmed), labelled jinja.
  std::string source = absl::StrReplaceAll(ReadTemplate("chatml.jinja"),
                                           {{"message['content']", "message['content'] | trim"}});
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(source);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), "jinja");
  EXPECT_EQ(MustApply(*t, {{"user", "  hi  "}}, true),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  // Literal text outside tags is output too, except the newline right after a block tag and,
  // as jinja2 does (keep_trailing_newline=False), the source's last newline; "\r\n" is "\n".
  t = ChatTemplate::FromSource(ReadTemplate("chatml.jinja") + " \n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(MustApply(*t, {{"user", "a"}}, false), "<|im_start|>user\na<|im_end|>\n ");
  t = ChatTemplate::FromSource(ReadTemplate("chatml.jinja") + " \r\n\r\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(MustApply(*t, {{"user", "a"}}, false), "<|im_start|>user\na<|im_end|>\n \n");
  t = ChatTemplate::FromSource(ReadTemplate("chatml.jinja") + "\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), "chatml");
}

TEST(ChatTemplateTest, Llama3RendersWithTheTokenizersBos) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(
      ReadTemplate("llama3_instruct.jinja"), {.bos = "<|begin_of_text|>", .eos = "<|eot_id|>"});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(MustApply(*t, {{"system", "Be brief."}, {"user", " Hi! "}}, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  absl::StatusOr<std::vector<PromptPiece>> pieces = t->ApplyPieces({{{"user", "Hi"}}}, false);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  // Markup, the role (content: it came from the request), markup, the text, markup.
  ASSERT_EQ(pieces->size(), 5u);
  EXPECT_EQ((*pieces)[0].text, "<|begin_of_text|><|start_header_id|>");
  EXPECT_TRUE((*pieces)[0].is_markup);
  EXPECT_EQ((*pieces)[3].text, "Hi");
  EXPECT_FALSE((*pieces)[3].is_markup);
}

TEST(ChatTemplateTest, BrokenAndEmptyTemplatesAreErrorsQuotingTheirBeginning) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource("");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("empty"));
  t = ChatTemplate::FromSource(" \n\t");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  t = ChatTemplate::FromSource("{% for message in messages %}{{ '<|im_start|>' ");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("unterminated '{{' tag opened at offset 29"));
  t = ChatTemplate::FromSource("line one\n{% call foo() %}x{% endcall %}");
  EXPECT_THAT(t.status().message(), HasSubstr("unsupported statement 'call' (at 'call', line 2)"));
  // What only rendering finds names its line too.
  t = ChatTemplate::FromSource("{% for m in messages %}\n\n{{ m.content | bogus }}{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<ChatMessage> one = {{"user", "a"}};
  EXPECT_THAT(t->Apply(one, false).status().message(),
              HasSubstr("unknown filter 'bogus' (line 3)"));
  t = ChatTemplate::FromSource(std::string(5000, 'x') + "{{");
  EXPECT_THAT(t.status().message(), HasSubstr(std::string(80, 'x') + "...\""));
  EXPECT_LT(t.status().message().size(), 600u);
}

TEST(ChatTemplateTest, ConversationsTheTemplateRefusesAreErrors) {
  ChatTemplate t = MustLoad("smollm2_instruct.jinja");
  absl::StatusOr<std::string> p = t.Apply({}, true);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("empty"));
  std::vector<ChatMessage> upper = {{"User", "a"}};
  EXPECT_THAT(t.Apply(upper, true).status().message(), HasSubstr("messages[0] has role \"User\""));
  // A tool result and a late system turn are the template's to render, as transformers does.
  std::vector<ChatMessage> tool = {{"user", "a"}, {"tool", "42"}, {"system", "c"}};
  EXPECT_THAT(MustApply(t, tool, false), HasSubstr("<|im_start|>tool\n42<|im_end|>\n"));
  // Mistral's template raises on a role it does not know: its message is the error.
  absl::StatusOr<ChatTemplate> mistral = ChatTemplate::FromSource(ReadTemplate("mistral_small_3_1.jinja"));
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  std::vector<ChatMessage> developer = {{"user", "a"}, {"developer", "b"}};
  p = mistral->Apply(developer, true);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("Only user and assistant roles are supported"));
}

TEST(ChatTemplateTest, OnlyASystemMessage) {
  ChatTemplate t = MustLoad("smollm2_instruct.jinja");
  EXPECT_EQ(MustApply(t, {{"system", ""}}, true),
            "<|im_start|>system\n<|im_end|>\n<|im_start|>assistant\n");
}

// A client's tool call whose `arguments` is not JSON stays a string; Qwen3.6's template iterates
// it with `|items`, which jinja2 refuses with a TypeError. So do we: an error, not a crash.
TEST(ChatTemplateTest, ItemsOfAClientsStringArgumentsIsAnErrorNotACrash) {
  ChatTemplate t = MustLoad("qwen3_6.jinja");
  ChatMessage call{"assistant", ""};
  call.tool_calls = nlohmann::ordered_json::parse(
      R"([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "not json"}}])");
  std::vector<ChatMessage> messages = {{"user", "go"}, call, {"user", "again"}};
  absl::StatusOr<std::string> p = t.Apply(messages, true);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("'items' does not apply to a string"));
  call.tool_calls[0]["function"]["arguments"] = {{"x", 1}};
  messages[1] = call;
  EXPECT_THAT(MustApply(t, messages, true), HasSubstr("<parameter=x>\n1\n</parameter>"));
}

// Qwen3.6's generation prompt opens `<think>` unless chat_template_kwargs say
// enable_thinking=false (then it prints an empty, closed block): the request's format follows.
TEST(ChatTemplateTest, EnableThinkingFalseMakesTheAnswerContent) {
  const ChatTemplate qwen36 = MustLoad("qwen3_6.jinja");
  EXPECT_EQ(qwen36.reasoning_format(), ReasoningFormat::kStartsInThinking);
  const nlohmann::ordered_json off = {{"enable_thinking", false}}, on = {{"enable_thinking", true}};
  EXPECT_EQ(qwen36.ReasoningFormatFor({.template_kwargs = &off}), ReasoningFormat::kThinkTags);
  EXPECT_EQ(qwen36.ReasoningFormatFor({.template_kwargs = &on}), ReasoningFormat::kStartsInThinking);
  EXPECT_EQ(qwen36.ReasoningFormatFor({}), ReasoningFormat::kStartsInThinking);
  // DeepSeek-R1's always opens it; Qwen3's lets the model write the tags.
  const ChatTemplate r1 = MustLoad("deepseek_r1_distill_qwen.jinja");
  EXPECT_EQ(r1.ReasoningFormatFor({.template_kwargs = &off}), ReasoningFormat::kStartsInThinking);
  EXPECT_EQ(MustLoad("qwen3.jinja").ReasoningFormatFor({.template_kwargs = &off}),
            ReasoningFormat::kThinkTags);
}

}  // namespace
}  // namespace tessera::chat
