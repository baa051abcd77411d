#include "common/chat/chat_template.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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

bool IsAllowedRole(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant";
}

absl::Status ValidateMessages(std::span<const ChatMessage> messages) {
  if (messages.empty()) {
    return absl::InvalidArgumentError(
        "chat messages are empty; a prompt needs at least one message");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (!IsAllowedRole(role)) {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "] has role \"", EscapeForMessage(role),
                       "\"; allowed roles are system, user, assistant"));
    }
    if (role == "system" && i != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i,
                       "] is a system message; a system message is only allowed as messages[0]"));
    }
  }
  return absl::OkStatus();
}

// The template's own text goes in as markup; `content` as data unless `content_is_markup` (the
// template's default system prompt).
void AppendTurn(std::string_view role, std::string_view content, bool content_is_markup,
                std::vector<PromptPiece>* out) {
  out->push_back({"<|im_start|>" + std::string(role) + "\n", true});
  if (!content.empty()) out->push_back({std::string(content), content_is_markup});
  out->push_back({"<|im_end|>\n", true});
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string_view jinja_source) {
  if (std::all_of(jinja_source.begin(), jinja_source.end(),
                  [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); })) {
    return absl::InvalidArgumentError("chat template is empty");
  }
  absl::StatusOr<std::vector<JinjaToken>> tokens = TokenizeJinja(jinja_source);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("chat template is not valid Jinja (",
                                                   tokens.status().message(), "); it begins ",
                                                   QuoteBeginning(jinja_source)));
  }
  std::optional<KnownTemplateMatch> match = MatchKnownTemplate(*tokens);
  if (!match.has_value()) {
    return absl::UnimplementedError(absl::StrCat(
        "unsupported chat template: ", DiagnoseTemplate(jinja_source), ". The template begins ",
        QuoteBeginning(jinja_source), ". Supported: ", SupportedTemplatesSummary(), "."));
  }
  return ChatTemplate(std::move(*match));
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromGguf(const gguf::GgufFile& file) {
  if (!file.HasKey(kChatTemplateKey)) {
    return absl::NotFoundError(absl::StrCat("GGUF metadata has no '", std::string(kChatTemplateKey),
                                            "'; the model ships no chat template"));
  }
  absl::StatusOr<std::string> source = file.GetString(kChatTemplateKey);
  if (!source.ok()) return source.status();
  return FromSource(*source);
}

absl::StatusOr<std::vector<PromptPiece>> ChatTemplate::ApplyPieces(
    std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  if (absl::Status s = ValidateMessages(messages); !s.ok()) return s;
  std::vector<PromptPiece> pieces;
  if (match_.variant == ChatMlVariant::kDefaultSystem && messages.front().role != "system") {
    AppendTurn("system", *match_.default_system_prompt, /*content_is_markup=*/true, &pieces);
  }
  for (const ChatMessage& message : messages) {
    AppendTurn(message.role, message.content, /*content_is_markup=*/false, &pieces);
  }
  if (add_generation_prompt) pieces.push_back({"<|im_start|>assistant\n", true});
  return pieces;
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
