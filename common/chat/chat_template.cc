#include "common/chat/chat_template.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/chat/jinja_json.h"

namespace tessera::chat {
namespace {

constexpr size_t kQuoteBytes = 80;

// Puts text on one line for an error message: control characters are escaped, everything else
// (quotes, backslashes, UTF-8) is kept so the quote reads like the template source.
std::string EscapeForMessage(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out.append("\\n");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      out.append(absl::StrFormat("\\x%02x", static_cast<unsigned char>(c)));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// The template's first bytes (cut at a UTF-8 boundary), quoted onto one line.
std::string QuoteBeginning(std::string_view source) {
  size_t cut = std::min(source.size(), kQuoteBytes);
  while (cut < source.size() && cut > 0 &&
         (static_cast<unsigned char>(source[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return absl::StrCat("\"", EscapeForMessage(source.substr(0, cut)),
                      cut < source.size() ? "...\"" : "\"");
}

// messages as the template sees them: a list of {role, content}, strings as content.
jinja::Value MessagesValue(std::span<const ChatMessage> messages) {
  jinja::Array list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    jinja::Object message;
    message.items.reserve(6);
    message.Set("role", jinja::Value::Content(m.role));
    message.Set("content", jinja::Value::Content(m.content));
    if (!m.tool_calls.is_null()) message.Set("tool_calls", jinja::FromJson(m.tool_calls));
    if (!m.tool_call_id.empty()) message.Set("tool_call_id", jinja::Value::Content(m.tool_call_id));
    if (!m.name.empty()) message.Set("name", jinja::Value::Content(m.name));
    if (!m.reasoning_content.empty()) {
      message.Set("reasoning_content", jinja::Value::Content(m.reasoning_content));
    }
    list.push_back(jinja::Value::MakeObject(std::move(message)));
  }
  return jinja::Value::MakeArray(std::move(list));
}

// The GGUF token text of the id under `key`, or "" (no such token).
std::string TokenText(const gguf::GgufFile& file, std::string_view key) {
  absl::StatusOr<int64_t> id = file.GetInt(key);
  if (!id.ok()) return "";
  absl::StatusOr<std::vector<std::string>> tokens = file.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok() || *id < 0 || *id >= static_cast<int64_t>(tokens->size())) return "";
  return (*tokens)[*id];
}

// Whether a one-user-message conversation's generation prompt (with `extras`) ends inside an
// unclosed `<think>`: the model's output then starts as reasoning.
bool GenerationPromptOpensThinking(const ChatTemplate& t, const ChatExtras& extras) {
  const std::vector<ChatMessage> probe = {{.role = "user", .content = "x"}};
  absl::StatusOr<std::vector<PromptPiece>> pieces =
      t.ApplyPieces(probe, /*add_generation_prompt=*/true, extras);
  if (!pieces.ok()) return false;
  std::string prompt;
  for (const PromptPiece& piece : *pieces) prompt += piece.text;
  const size_t open = prompt.rfind("<think>");
  const size_t close = prompt.rfind("</think>");
  return open != std::string::npos && (close == std::string::npos || close < open);
}

ReasoningFormat DetectReasoning(const ChatTemplate& t, std::string_view source) {
  if (source.find("</think>") == std::string_view::npos) return ReasoningFormat::kNone;
  return GenerationPromptOpensThinking(t, {}) ? ReasoningFormat::kStartsInThinking
                                              : ReasoningFormat::kThinkTags;
}

ToolCallFormat DetectToolCalls(std::string_view source) {
  if (source.find("<tool_call>") != std::string_view::npos) {
    return source.find("<function=") != std::string_view::npos ? ToolCallFormat::kQwenXml
                                                                : ToolCallFormat::kHermes;
  }
  if (source.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::kMistral;
  if (source.find("<|python_tag|>") != std::string_view::npos ||
      source.find("ipython") != std::string_view::npos) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kNone;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string_view jinja_source,
                                                      ChatTokens tokens) {
  if (std::all_of(jinja_source.begin(), jinja_source.end(),
                  [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); })) {
    return absl::InvalidArgumentError("chat template is empty");
  }
  absl::StatusOr<jinja::Template> engine = jinja::Template::Parse(jinja_source);
  if (!engine.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("chat template is not valid Jinja (",
                                                   engine.status().message(), "); it begins ",
                                                   QuoteBeginning(jinja_source)));
  }
  ChatTemplate out(*std::move(engine), std::move(tokens));
  out.reasoning_ = DetectReasoning(out, jinja_source);
  out.tool_calls_ = DetectToolCalls(jinja_source);
  if (absl::StatusOr<std::vector<JinjaToken>> lexed = TokenizeJinja(jinja_source); lexed.ok()) {
    if (std::optional<KnownTemplateMatch> match = MatchKnownTemplate(*lexed)) {
      out.shape_ = match->shape;
      out.default_system_prompt_ = match->default_system_prompt;
    }
  }
  return out;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromGguf(const gguf::GgufFile& file) {
  if (!file.HasKey(kChatTemplateKey)) {
    return absl::NotFoundError(absl::StrCat("GGUF metadata has no '", std::string(kChatTemplateKey),
                                            "'; the model ships no chat template"));
  }
  absl::StatusOr<std::string> source = file.GetString(kChatTemplateKey);
  if (!source.ok()) return source.status();
  return FromSource(*source, TokensOf(file));
}

ChatTokens ChatTemplate::TokensOf(const gguf::GgufFile& file) {
  return {.bos = TokenText(file, "tokenizer.ggml.bos_token_id"),
          .eos = TokenText(file, "tokenizer.ggml.eos_token_id")};
}

absl::StatusOr<std::vector<PromptPiece>> ChatTemplate::ApplyPieces(
    std::span<const ChatMessage> messages, bool add_generation_prompt,
    const ChatExtras& extras) const {
  if (messages.empty()) {
    return absl::InvalidArgumentError(
        "chat messages are empty; a prompt needs at least one message");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" &&
        role != "tool") {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "] has role \"", EscapeForMessage(role),
                       "\"; allowed roles are system, developer, user, assistant, tool"));
    }
  }
  jinja::Object context;
  context.Set("messages", MessagesValue(messages));
  context.Set("add_generation_prompt", jinja::Value::Bool(add_generation_prompt));
  context.Set("bos_token", jinja::Value::Markup(tokens_.bos));
  context.Set("eos_token", jinja::Value::Markup(tokens_.eos));
  if (extras.tools != nullptr) context.Set("tools", jinja::FromJson(*extras.tools));
  if (extras.template_kwargs != nullptr && extras.template_kwargs->is_object()) {
    for (const auto& [key, value] : extras.template_kwargs->items()) {
      if (key == "messages") continue;  // the conversation is not the client's to replace
      context.Set(key, jinja::FromJson(value));
    }
  }
  absl::StatusOr<jinja::Text> text = engine_.Render(context);
  if (!text.ok()) return text.status();
  std::vector<PromptPiece> pieces;
  size_t at = 0;  // markup before each content run, then the run
  for (const auto& [begin, end] : text->content_runs) {
    if (at < begin) pieces.push_back({text->bytes.substr(at, begin - at), true});
    pieces.push_back({text->bytes.substr(begin, end - begin), false});
    at = end;
  }
  if (at < text->bytes.size()) pieces.push_back({text->bytes.substr(at), true});
  return pieces;
}

ReasoningFormat ChatTemplate::ReasoningFormatFor(const ChatExtras& extras) const {
  if (reasoning_ != ReasoningFormat::kStartsInThinking || extras.template_kwargs == nullptr) {
    return reasoning_;
  }
  return GenerationPromptOpensThinking(*this, extras) ? ReasoningFormat::kStartsInThinking
                                                      : ReasoningFormat::kThinkTags;
}

absl::StatusOr<std::string> ChatTemplate::Apply(std::span<const ChatMessage> messages,
                                                bool add_generation_prompt) const {
  absl::StatusOr<std::vector<PromptPiece>> pieces = ApplyPieces(messages, add_generation_prompt);
  if (!pieces.ok()) return pieces.status();
  std::string prompt;
  for (const PromptPiece& piece : *pieces) prompt.append(piece.text);
  return prompt;
}

}  // namespace tessera::chat
