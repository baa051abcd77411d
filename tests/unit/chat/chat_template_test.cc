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
  EXPECT_EQ(t.name(), "chatml");
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

TEST(ChatTemplateTest, SemanticDifferencesAreRejected) {
  // `| trim` changes the output, so this is not the known template any more.
  std::string source = absl::StrReplaceAll(ReadTemplate("chatml.jinja"),
                                           {{"message['content']", "message['content'] | trim"}});
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(source);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(), HasSubstr("looks like ChatML but does not match"));
  // Literal text outside tags is output too...
  t = ChatTemplate::FromSource(ReadTemplate("chatml.jinja") + " \n");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  // ...except the newline right after a block tag, which jinja's trim_blocks drops.
  t = ChatTemplate::FromSource(ReadTemplate("chatml.jinja") + "\n");
  EXPECT_TRUE(t.ok()) << t.status();
}

TEST(ChatTemplateTest, RejectsLlama3) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(ReadTemplate("llama3_instruct.jinja"));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(),
              AllOf(HasSubstr("Llama 3"), HasSubstr("{% set loop_messages = messages %}"),
                    HasSubstr("Supported: plain ChatML")));
}

TEST(ChatTemplateTest, RejectsQwen3NamingToolsAndReasoning) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(ReadTemplate("qwen3.jinja"));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(),
              AllOf(HasSubstr("looks like ChatML but uses tools, reasoning (<think>)"),
                    HasSubstr("\"{%- if tools %}\\n    {{- '<|im_start|>system\\n' }}")));
}

TEST(ChatTemplateTest, RejectsGarbageEmptyAndBrokenJinja) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource("hello world, not a template");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(), AllOf(HasSubstr("does not look like any known chat format"),
                                          HasSubstr("\"hello world, not a template\"")));
  t = ChatTemplate::FromSource("");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("empty"));
  t = ChatTemplate::FromSource(" \n\t");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  t = ChatTemplate::FromSource("{% for message in messages %}{{ '<|im_start|>' ");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("unterminated '{{' tag opened at offset 29"));
}

TEST(ChatTemplateTest, LongTemplatesAreQuotedShortly) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(std::string(5000, 'x'));
  EXPECT_THAT(t.status().message(), HasSubstr(std::string(80, 'x') + "...\""));
  EXPECT_LT(t.status().message().size(), 600u);
}

TEST(ChatTemplateTest, ApplyRejectsBadConversations) {
  ChatTemplate t = MustLoad("smollm2_instruct.jinja");
  absl::StatusOr<std::string> p = t.Apply({}, true);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("empty"));

  std::vector<ChatMessage> tool = {{"user", "a"}, {"tool", "42"}};
  p = t.Apply(tool, true);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), AllOf(HasSubstr("messages[1]"), HasSubstr("\"tool\""),
                                          HasSubstr("system, user, assistant")));

  std::vector<ChatMessage> upper = {{"User", "a"}};
  EXPECT_THAT(t.Apply(upper, true).status().message(), HasSubstr("messages[0] has role \"User\""));

  std::vector<ChatMessage> late_system = {{"user", "a"}, {"assistant", "b"}, {"system", "c"}};
  p = t.Apply(late_system, true);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(),
              AllOf(HasSubstr("messages[2]"), HasSubstr("only allowed as messages[0]")));
}

TEST(ChatTemplateTest, OnlyASystemMessage) {
  ChatTemplate t = MustLoad("smollm2_instruct.jinja");
  EXPECT_EQ(MustApply(t, {{"system", ""}}, true),
            "<|im_start|>system\n<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace tessera::chat
