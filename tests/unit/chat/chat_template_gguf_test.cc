#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/chat/chat_template.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::chat {
namespace {

using ::testing::HasSubstr;

constexpr char kModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(ChatTemplateGgufTest, SmolLm2ModelFilePromptIsExact) {
  // The default model is a required test input, not optional: a missing file is a failure.
  ASSERT_TRUE(std::filesystem::exists(kModelPath))
      << kModelPath << " is missing; run scripts/fetch_model.sh to download it";
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(kModelPath);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromGguf(**file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), "chatml-default-system");
  std::vector<ChatMessage> messages = {{"user", "What is the capital of France?"}};
  absl::StatusOr<std::string> prompt = t->Apply(messages, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> BuildGguf(const gguf::GgufWriter& writer) {
  return gguf::GgufFile::FromBuffer(writer.Serialize());
}

TEST(ChatTemplateGgufTest, MissingKeyIsNotFoundNamingTheKey) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = BuildGguf(writer);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromGguf(**file);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("tokenizer.chat_template"));
}

TEST(ChatTemplateGgufTest, WrongTypeAndBrokenTemplateAreReportedAndBosComesFromTheVocabulary) {
  gguf::GgufWriter writer;
  writer.AddUint32("tokenizer.chat_template", 7);
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = BuildGguf(writer);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromGguf(**file);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("tokenizer.chat_template"));

  gguf::GgufWriter broken;
  broken.AddString("tokenizer.chat_template", "{% if %}");
  file = BuildGguf(broken);
  ASSERT_TRUE(file.ok()) << file.status();
  t = ChatTemplate::FromGguf(**file);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("not valid Jinja"));

  gguf::GgufWriter llama;
  llama.AddString("tokenizer.chat_template",
                  "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}");
  llama.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<|begin_of_text|>", "<|eot_id|>"});
  llama.AddUint32("tokenizer.ggml.bos_token_id", 1);
  llama.AddUint32("tokenizer.ggml.eos_token_id", 2);
  file = BuildGguf(llama);
  ASSERT_TRUE(file.ok()) << file.status();
  t = ChatTemplate::FromGguf(**file);
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<ChatMessage> messages = {{"user", "hi"}};
  EXPECT_EQ(t->Apply(messages, false).value(), "<|begin_of_text|>hi<|eot_id|>");
}

}  // namespace
}  // namespace tessera::chat
