// The chat templates tessera names, recognized structurally (see jinja_lexer.h): a label for
// `ChatTemplate::shape()` (ModelInfo, `tessera inspect`) and the default system prompt it shows.
// Rendering does not depend on it (every template runs through common/chat/jinja_render.h).
//
// Each known template is kept as its real Jinja source with `@@SYSTEM@@` standing where the
// model's default system prompt goes. A template is recognized when its canonical token stream
// equals a known one, with the placeholder matching any text (the same text everywhere it
// appears). Recognition never guesses: one differing token means "not known".
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/chat/jinja_lexer.h"

namespace tessera::chat {

// How a recognized template renders a conversation of system/user/assistant messages.
enum class ChatMlVariant {
  kPlain,          // every message as <|im_start|>role\ncontent<|im_end|>\n
  kDefaultSystem,  // the same, with a default system turn when messages[0] is not "system"
};

struct KnownTemplateMatch {
  ChatMlVariant variant = ChatMlVariant::kPlain;
  std::string shape;  // which known source matched: "chatml", "chatml-default-system", "qwen2.5"
  std::optional<std::string> default_system_prompt;  // set for kDefaultSystem
};

// nullopt when `tokens` (from TokenizeJinja) is not one of the known templates.
std::optional<KnownTemplateMatch> MatchKnownTemplate(const std::vector<JinjaToken>& tokens);

}  // namespace tessera::chat
