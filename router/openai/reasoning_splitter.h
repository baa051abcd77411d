// Splits a chat choice's generated text into `reasoning_content` and `content` (OpenAI's and
// vLLM's fields for thinking models), streaming: text inside `<think>…</think>` (or, for
// ReasoningFormat::kStartsInThinking, everything before the first `</think>`) is reasoning, the
// rest content, the tags themselves neither. A tag split across deltas is held back until it is
// resolved, so no delta ever shows half a tag; Finish() returns what is still held.
//
// One per choice; used by that choice's response encoding on the request's thread.
#pragma once

#include <string>
#include <string_view>

#include "common/chat/chat_template.h"

namespace tessera::router::openai {

class ReasoningSplitter {
 public:
  struct Parts {
    std::string reasoning;
    std::string content;
  };

  explicit ReasoningSplitter(chat::ReasoningFormat format);

  Parts Feed(std::string_view delta);
  Parts Finish();
  // The whole text at once (non-streaming responses).
  static Parts Split(chat::ReasoningFormat format, std::string_view text);

 private:
  enum class State { kContent, kReasoning, kDone };

  void Emit(std::string_view text, Parts* out) const;

  State state_;
  std::string held_;  // a suffix that may be the start of the tag awaited next
  bool leading_ = true;  // kThinkTags: only a `<think>` at the very start opens reasoning
};

}  // namespace tessera::router::openai
