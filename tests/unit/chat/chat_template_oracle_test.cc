// Compares ChatTemplate::Apply with prompts rendered by Hugging Face transformers'
// apply_chat_template (tools/oracle/chat_template_reference.py wrote the reference file).
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/chat/chat_template.h"
#include "gtest/gtest.h"

namespace tessera::chat {
namespace {

constexpr char kDataDir[] = "tests/data/chat/";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(ChatTemplateOracleTest, MatchesTransformersOnEveryReferenceCase) {
  nlohmann::json doc = nlohmann::json::parse(
      ReadFile(std::string(kDataDir) + "chat_template_reference.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "chat_template_reference.json is not valid JSON";
  ASSERT_TRUE(doc.contains("cases"));
  std::map<std::string, ChatTemplate> templates;
  int num_cases = 0;
  for (const nlohmann::json& c : doc["cases"]) {
    const std::string name = c["template"].get<std::string>();
    if (!templates.contains(name)) {
      absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(ReadFile(kDataDir + name));
      ASSERT_TRUE(t.ok()) << name << ": " << t.status();
      templates.emplace(name, *std::move(t));
    }
    std::vector<ChatMessage> messages;
    for (const nlohmann::json& m : c["messages"]) {
      messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    const bool gen = c["add_generation_prompt"].get<bool>();
    absl::StatusOr<std::string> prompt = templates.at(name).Apply(messages, gen);
    ASSERT_TRUE(prompt.ok()) << name << " case " << num_cases << ": " << prompt.status();
    EXPECT_EQ(*prompt, c["expected"].get<std::string>())
        << name << " case " << num_cases << " (add_generation_prompt=" << gen << ")";
    ++num_cases;
  }
  EXPECT_GE(num_cases, 50);
  EXPECT_EQ(templates.size(), 4u);
}

}  // namespace
}  // namespace tessera::chat
