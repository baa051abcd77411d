// ChatTemplate turns a conversation into the prompt text a chat model was trained on.
//
// Templates are recognized, not interpreted: FromSource compares the Jinja source structurally
// with the templates tessera knows (known_templates.h) and refuses everything else with
// UNIMPLEMENTED, so an unsupported model fails loudly instead of getting a subtly wrong prompt.
// Supported: the ChatML family — plain ChatML, ChatML with a default system prompt
// (SmolLM2-Instruct, Qwen2-Instruct) and Qwen2.5-Instruct's ChatML (used without tools).
//
// Conversation rules (Apply), chosen to match what these templates were trained on:
//   - at least one message;
//   - roles are exactly "system", "user" or "assistant" (case-sensitive; no "tool");
//   - a "system" message may only be messages[0]. The Jinja templates would render a later
//     system turn verbatim, but the models never saw one in training, so it is refused rather
//     than silently producing an off-distribution prompt;
//   - content is copied byte for byte (no trimming); roles need not alternate, and the last
//     message may be an assistant turn (continuation) — the templates allow both.
// Content is not escaped: text that spells "<|im_end|>" becomes a control token if the tokenizer
// is asked to parse special tokens in it. ApplyPieces keeps the template's own markup apart from
// message content so a caller can tokenize content as plain text (Tokenizer::EncodeSegments):
// then only the template's markers are control tokens and a user cannot close their turn.
//
// Ownership/threading: a small immutable value; copy freely; Apply is const and thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat/known_templates.h"
#include "common/gguf/gguf_file.h"

namespace tessera::chat {

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

// One piece of a rendered prompt: the template's markup (turn markers, role names, the default
// system prompt) or a message's content, copied verbatim.
struct PromptPiece {
  std::string text;
  bool is_markup = false;
};

inline constexpr std::string_view kChatTemplateKey = "tokenizer.chat_template";

class ChatTemplate {
 public:
  // Recognizes `jinja_source` (as stored in GGUF `tokenizer.chat_template` or HF
  // tokenizer_config.json). INVALID_ARGUMENT for an empty or lexically broken template;
  // UNIMPLEMENTED, quoting the template's beginning and the family it resembles, for any
  // template that is not a supported one.
  static absl::StatusOr<ChatTemplate> FromSource(std::string_view jinja_source);
  // Reads `tokenizer.chat_template` from the file. NOT_FOUND naming the key when it is absent;
  // otherwise as FromSource.
  static absl::StatusOr<ChatTemplate> FromGguf(const gguf::GgufFile& file);

  // Template family: "chatml".
  std::string name() const { return "chatml"; }
  // Which known source matched: "chatml", "chatml-default-system" or "qwen2.5".
  const std::string& shape() const { return match_.shape; }
  // The system prompt the template inserts when messages[0] is not a system message.
  bool has_default_system_prompt() const { return match_.default_system_prompt.has_value(); }
  const std::optional<std::string>& default_system_prompt() const {
    return match_.default_system_prompt;
  }

  // Renders `messages`, then (when `add_generation_prompt`) the opening of an assistant turn
  // "<|im_start|>assistant\n". INVALID_ARGUMENT naming the message index for rule violations
  // (see the file comment).
  absl::StatusOr<std::string> Apply(std::span<const ChatMessage> messages,
                                    bool add_generation_prompt) const;
  // The same prompt as pieces; concatenated they equal Apply's text. Same errors.
  absl::StatusOr<std::vector<PromptPiece>> ApplyPieces(std::span<const ChatMessage> messages,
                                                       bool add_generation_prompt) const;

 private:
  explicit ChatTemplate(KnownTemplateMatch match) : match_(std::move(match)) {}

  KnownTemplateMatch match_;
};

}  // namespace tessera::chat
