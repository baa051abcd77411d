// ReasoningSplitter (router/openai/reasoning_splitter.h): reasoning and content of a thinking
// model's output, the same whatever the deltas (every one- and two-cut split of each text), no
// delta showing part of a tag, and the formats chosen from real templates.
#include "router/openai/reasoning_splitter.h"

#include "router/openai/openai_response.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::router::openai {
namespace {

using chat::ReasoningFormat;

struct Case {
  ReasoningFormat format;
  std::string text;
  std::string reasoning;
  std::string content;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {ReasoningFormat::kThinkTags, "<think>\n91 = 7 * 13\n</think>\n\nNo.", "\n91 = 7 * 13\n",
       "\n\nNo."},
      {ReasoningFormat::kThinkTags, "\n <think>a</think>b", "a", "b"},
      {ReasoningFormat::kThinkTags, "Plain answer, <think> later is text", "",
       "Plain answer, <think> later is text"},
      {ReasoningFormat::kThinkTags, "<thinking about it", "", "<thinking about it"},
      {ReasoningFormat::kThinkTags, "<think>never closed </thi", "never closed </thi", ""},
      {ReasoningFormat::kThinkTags, "  ", "", "  "},
      {ReasoningFormat::kStartsInThinking, "step 1\nstep 2\n</think>\n\nAnswer: 4", "step 1\nstep 2\n",
       "\n\nAnswer: 4"},
      {ReasoningFormat::kStartsInThinking, "a </think> b </think> c", "a ", " b </think> c"},
      {ReasoningFormat::kNone, "<think>x</think>y", "", "<think>x</think>y"},
  };
  return cases;
}

// Feeds `text` in pieces cut at `cuts`, collecting the parts; checks no delta shows a tag.
ReasoningSplitter::Parts FeedCut(const Case& c, std::vector<size_t> cuts) {
  ReasoningSplitter splitter(c.format);
  ReasoningSplitter::Parts all;
  size_t at = 0;
  cuts.push_back(c.text.size());
  for (size_t cut : cuts) {
    ReasoningSplitter::Parts p = splitter.Feed(std::string_view(c.text).substr(at, cut - at));
    if (c.format != ReasoningFormat::kNone) {
      EXPECT_EQ(p.reasoning.find("</think>"), std::string::npos);
    }
    all.reasoning += p.reasoning;
    all.content += p.content;
    at = cut;
  }
  ReasoningSplitter::Parts rest = splitter.Finish();
  all.reasoning += rest.reasoning;
  all.content += rest.content;
  return all;
}

TEST(ReasoningSplitterTest, EverySplitOfTheTextGivesTheSameParts) {
  for (const Case& c : Cases()) {
    const ReasoningSplitter::Parts whole = ReasoningSplitter::Split(c.format, c.text);
    EXPECT_EQ(whole.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(whole.content, c.content) << c.text;
    for (size_t i = 0; i <= c.text.size(); ++i) {
      for (size_t j = i; j <= c.text.size(); ++j) {
        const ReasoningSplitter::Parts cut = FeedCut(c, {i, j});
        ASSERT_EQ(cut.reasoning, c.reasoning) << c.text << " cut at " << i << ", " << j;
        ASSERT_EQ(cut.content, c.content) << c.text << " cut at " << i << ", " << j;
      }
    }
  }
}

TEST(ReasoningSplitterTest, APartialCloseTagIsHeldUntilResolved) {
  ReasoningSplitter splitter(ReasoningFormat::kStartsInThinking);
  ReasoningSplitter::Parts p = splitter.Feed("thinking </thi");
  EXPECT_EQ(p.reasoning, "thinking ");
  p = splitter.Feed("nk>answer");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "answer");
}

std::string ReadTemplate(const std::string& name) {
  std::ifstream in("tests/data/chat/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ReasoningSplitterTest, TheFormatComesFromTheTemplate) {
  for (auto [name, format] : {std::pair{"qwen3.jinja", ReasoningFormat::kThinkTags},
                              std::pair{"deepseek_r1_distill_qwen.jinja",
                                        ReasoningFormat::kStartsInThinking},
                              std::pair{"smollm2_instruct.jinja", ReasoningFormat::kNone},
                              std::pair{"llama3_instruct.jinja", ReasoningFormat::kNone}}) {
    absl::StatusOr<chat::ChatTemplate> t = chat::ChatTemplate::FromSource(ReadTemplate(name));
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_EQ(t->reasoning_format(), format) << name;
  }
}

}  // namespace
}  // namespace tessera::router::openai

namespace tessera::router::openai {
namespace {

// The chat encoder puts reasoning in `reasoning_content`, streaming and not, and leaves plain
// models' deltas as they were.
TEST(ReasoningSplitterTest, ChatResponsesCarryReasoningContent) {
  ResponseEncoder encoder(Endpoint::kChatCompletions, "id", "m", 0, nullptr, false, false,
                          ReasoningFormat::kStartsInThinking);
  v1::GenerateResponse delta;
  delta.set_text("think </th");
  nlohmann::json chunk = encoder.Chunk(0, delta, true);
  EXPECT_EQ(chunk["choices"][0]["delta"]["reasoning_content"], "think ");
  EXPECT_FALSE(chunk["choices"][0]["delta"].contains("content"));
  delta.set_text("ink>answer");
  delta.set_finish_reason(v1::FINISH_REASON_STOP);
  chunk = encoder.Chunk(0, delta, false);
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "answer");
  EXPECT_FALSE(chunk["choices"][0]["delta"].contains("reasoning_content"));

  const nlohmann::json body = encoder.Complete({ChoiceResult{.text = "why</think>because"}});
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "why");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "because");

  ResponseEncoder plain(Endpoint::kChatCompletions, "id", "m", 0, nullptr, false, false);
  delta.set_text("");
  delta.set_finish_reason(v1::FINISH_REASON_UNSPECIFIED);
  chunk = plain.Chunk(0, delta, true);
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "");
}

}  // namespace
}  // namespace tessera::router::openai
