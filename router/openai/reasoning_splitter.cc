#include "router/openai/reasoning_splitter.h"

#include <algorithm>

#include "router/openai/partial_tag.h"

namespace tessera::router::openai {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

}  // namespace

ReasoningSplitter::ReasoningSplitter(chat::ReasoningFormat format)
    : state_(format == chat::ReasoningFormat::kStartsInThinking ? State::kReasoning
             : format == chat::ReasoningFormat::kThinkTags      ? State::kContent
                                                                 : State::kDone) {}

void ReasoningSplitter::Emit(std::string_view text, Parts* out) const {
  (state_ == State::kReasoning ? out->reasoning : out->content).append(text);
}

ReasoningSplitter::Parts ReasoningSplitter::Feed(std::string_view delta) {
  Parts out;
  if (state_ == State::kDone) {
    out.content.assign(delta);
    return out;
  }
  std::string text = held_ + std::string(delta);
  held_.clear();
  while (!text.empty() && state_ != State::kDone) {
    if (state_ == State::kContent) {
      // Thinking opens only at the very start of the output (after any whitespace).
      const size_t first = text.find_first_not_of(" \t\r\n");
      if (!leading_ || first == std::string::npos) {
        if (!leading_) break;
        held_ = text;  // only whitespace so far: it may still precede <think>
        return out;
      }
      if (text.compare(first, kOpen.size(), kOpen) == 0) {
        state_ = State::kReasoning;
        leading_ = false;
        text.erase(0, first + kOpen.size());
        continue;
      }
      if (kOpen.substr(0, text.size() - first) == std::string_view(text).substr(first)) {
        held_ = text;  // a partial "<thi"
        return out;
      }
      leading_ = false;
      break;
    }
    const size_t close = text.find(kClose);
    if (close == std::string::npos) {
      const size_t keep = PartialTagSuffix(text, kClose);
      Emit(std::string_view(text).substr(0, text.size() - keep), &out);
      held_ = text.substr(text.size() - keep);
      return out;
    }
    Emit(std::string_view(text).substr(0, close), &out);
    text.erase(0, close + kClose.size());
    state_ = State::kDone;
  }
  out.content.append(text);
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::Finish() {
  Parts out;
  if (state_ == State::kReasoning) {
    out.reasoning = std::move(held_);
  } else {
    out.content = std::move(held_);
  }
  held_.clear();
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::Split(chat::ReasoningFormat format,
                                                  std::string_view text) {
  ReasoningSplitter splitter(format);
  Parts out = splitter.Feed(text);
  Parts rest = splitter.Finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

}  // namespace tessera::router::openai
