#include "common/chat/jinja_lexer.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tessera::chat {
namespace {

enum class TagKind { kExpr, kStmt, kComment };

// One `{{ }}`, `{% %}` or `{# #}` with its whitespace-control markers ('-', '+' or 0).
struct RawTag {
  TagKind kind = TagKind::kExpr;
  int line = 0;
  char left_marker = 0;
  char right_marker = 0;
  std::vector<JinjaToken> tokens;
};

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

bool IsIdentifier(std::string_view s) {
  if (s.empty() || !IsNameStart(s[0])) return false;
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(source) {}

  // Splits the source into alternating text / tag pieces: texts_[i] precedes tags_[i], and
  // texts_ has one more entry (the tail).
  absl::Status Split() {
    while (true) {
      size_t open = FindTagOpen(pos_);
      texts_.emplace_back(src_.substr(pos_, open - pos_));
      if (open == src_.size()) return absl::OkStatus();
      RawTag tag;
      tag.line = LineOf(open);
      if (absl::Status s = LexTag(open, &tag); !s.ok()) return s;
      tags_.push_back(std::move(tag));
    }
  }

  std::vector<JinjaToken> Emit();

 private:
  // The 1-based line of `offset`; offsets asked for mostly increase, so it counts on from the
  // last one (and starts over when asked for an earlier one).
  int LineOf(size_t offset) {
    if (offset < line_offset_) {
      line_offset_ = 0;
      line_ = 1;
    }
    for (; line_offset_ < offset && line_offset_ < src_.size(); ++line_offset_) {
      if (src_[line_offset_] == '\n') ++line_;
    }
    return line_;
  }

  size_t FindTagOpen(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  absl::Status LexTag(size_t open, RawTag* tag);
  absl::Status LexComment(size_t open, RawTag* tag);
  absl::Status LexOneToken(std::vector<JinjaToken>* out, int* depth);
  absl::Status LexString(std::vector<JinjaToken>* out);
  absl::Status DecodeEscape(size_t literal_start, std::string* value);

  std::string_view src_;
  size_t pos_ = 0;
  std::vector<std::string_view> texts_;
  std::vector<RawTag> tags_;
  size_t line_offset_ = 0;
  int line_ = 1;
};

absl::Status Lexer::LexTag(size_t open, RawTag* tag) {
  const char type = src_[open + 1];
  pos_ = open + 2;
  if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+'))
    tag->left_marker = src_[pos_++];
  if (type == '#') return LexComment(open, tag);
  tag->kind = type == '{' ? TagKind::kExpr : TagKind::kStmt;
  const std::string_view close = type == '{' ? "}}" : "%}";
  int depth = 0;  // brackets open inside the tag; `}}` closes only at depth 0 (dict literals)
  while (true) {
    while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
    if (pos_ >= src_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unterminated '", std::string(src_.substr(open, 2)), "' tag opened at offset ", open));
    }
    if (depth == 0) {
      if ((src_[pos_] == '-' || src_[pos_] == '+') && src_.substr(pos_ + 1, 2) == close) {
        tag->right_marker = src_[pos_];
        pos_ += 3;
        return absl::OkStatus();
      }
      if (src_.substr(pos_, 2) == close) {
        pos_ += 2;
        return absl::OkStatus();
      }
    }
    if (absl::Status s = LexOneToken(&tag->tokens, &depth); !s.ok()) return s;
  }
}

absl::Status Lexer::LexComment(size_t open, RawTag* tag) {
  tag->kind = TagKind::kComment;
  size_t end = src_.find("#}", pos_);
  if (end == std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("unterminated comment opened at offset ", open));
  }
  if (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+'))
    tag->right_marker = src_[end - 1];
  pos_ = end + 2;
  return absl::OkStatus();
}

absl::Status Lexer::LexOneToken(std::vector<JinjaToken>* out, int* depth) {
  const char c = src_[pos_];
  if (c == '\'' || c == '"') return LexString(out);
  size_t start = pos_;
  if (IsNameStart(c)) {
    while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
    out->push_back({JinjaTokenKind::kName, std::string(src_.substr(start, pos_ - start)),
                    LineOf(start)});
    return absl::OkStatus();
  }
  if (IsDigit(c)) {
    while (pos_ < src_.size() && (IsDigit(src_[pos_]) || src_[pos_] == '.' || src_[pos_] == '_'))
      ++pos_;
    out->push_back({JinjaTokenKind::kNumber, std::string(src_.substr(start, pos_ - start)),
                    LineOf(start)});
    return absl::OkStatus();
  }
  static constexpr std::string_view kTwoCharOps[] = {"==", "!=", "<=", ">=", "//", "**"};
  for (std::string_view op : kTwoCharOps) {
    if (src_.substr(pos_, 2) == op) {
      pos_ += 2;
      out->push_back({JinjaTokenKind::kOperator, std::string(op), LineOf(pos_ - 2)});
      return absl::OkStatus();
    }
  }
  static constexpr std::string_view kOneCharOps = "+-*/%()[]{}.,:|~<>=!";
  if (kOneCharOps.find(c) == std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected character '",
                                                   absl::CEscape(std::string(1, c)),
                                                   "' inside a tag at offset ", pos_));
  }
  if (c == '(' || c == '[' || c == '{') ++*depth;
  if ((c == ')' || c == ']' || c == '}') && *depth > 0) --*depth;
  ++pos_;
  out->push_back({JinjaTokenKind::kOperator, std::string(1, c), LineOf(pos_ - 1)});
  return absl::OkStatus();
}

// The character a one-letter escape stands for (Python's), or nullopt.
std::optional<char> SimpleEscape(char e) {
  switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'v': return '\v';
    case '\\':
    case '\'':
    case '"': return e;
    default: return std::nullopt;
  }
}

// Decodes the escape after a backslash at pos_ (Python unicode-escape semantics, which jinja2
// uses for string literals). An unknown escape keeps its backslash, as Python does.
absl::Status Lexer::DecodeEscape(size_t literal_start, std::string* value) {
  const char e = src_[pos_++];
  if (std::optional<char> simple = SimpleEscape(e)) {
    value->push_back(*simple);
    return absl::OkStatus();
  }
  if (e == '\n') return absl::OkStatus();  // line continuation
  if (e >= '0' && e <= '7') {              // up to three octal digits
    uint32_t code = e - '0';
    for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++i) {
      code = code * 8 + (src_[pos_++] - '0');
    }
    AppendUtf8(code, value);
    return absl::OkStatus();
  }
  if (e != 'x' && e != 'u' && e != 'U') {
    value->push_back('\\');
    value->push_back(e);
    return absl::OkStatus();
  }
  const size_t num_digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
  uint32_t code = 0;
  bool ok = pos_ + num_digits <= src_.size();
  for (size_t i = 0; ok && i < num_digits; ++i) {
    const int h = HexValue(src_[pos_ + i]);
    ok = h >= 0;
    code = code * 16 + static_cast<uint32_t>(h);
  }
  if (!ok || code > 0x10FFFF) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad \\", std::string(1, e), " escape in string literal at offset ", literal_start));
  }
  pos_ += num_digits;
  AppendUtf8(code, value);
  return absl::OkStatus();
}

absl::Status Lexer::LexString(std::vector<JinjaToken>* out) {
  const size_t start = pos_;
  const char quote = src_[pos_++];
  std::string value;
  while (pos_ < src_.size() && src_[pos_] != quote) {
    const char c = src_[pos_++];
    if (c != '\\' || pos_ >= src_.size()) {
      value.push_back(c);
    } else if (absl::Status s = DecodeEscape(start, &value); !s.ok()) {
      return s;
    }
  }
  if (pos_ >= src_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unterminated string literal at offset ", start));
  }
  ++pos_;  // closing quote
  out->push_back({JinjaTokenKind::kString, std::move(value), LineOf(start)});
  return absl::OkStatus();
}

// Applies whitespace control (explicit '-' markers, trim_blocks, lstrip_blocks) to one text piece.
// `prev` / `next` are the tags around it (nullptr at the template's ends).
std::string_view TrimText(std::string_view text, const RawTag* prev, const RawTag* next) {
  size_t begin = 0;
  size_t end = text.size();
  bool line_starting = prev == nullptr;
  if (prev != nullptr) {
    if (prev->right_marker == '-') {
      while (begin < end && IsSpace(text[begin])) ++begin;
      line_starting = begin > 0 && text[begin - 1] == '\n';
    } else if (prev->kind != TagKind::kExpr && prev->right_marker != '+' && !text.empty() &&
               text[0] == '\n') {
      begin = 1;  // trim_blocks: drop the first newline after a block or comment tag
      line_starting = true;
    }
  }
  if (next != nullptr) {
    if (next->left_marker == '-') {
      while (end > begin && IsSpace(text[end - 1])) --end;
    } else if (next->kind != TagKind::kExpr && next->left_marker != '+') {
      // lstrip_blocks: spaces/tabs between a line start and a block tag are dropped.
      size_t newline = text.substr(begin, end - begin).rfind('\n');
      size_t line_pos = newline == std::string_view::npos ? begin : begin + newline + 1;
      bool all_space = line_pos < end;
      for (size_t i = line_pos; i < end && all_space; ++i) all_space = IsSpace(text[i]);
      if ((line_pos > begin || line_starting) && all_space) end = line_pos;
    }
  }
  return text.substr(begin, end - begin);
}

// Rewrites `x['name']` to `x.name` (both look the key up on a dict the same way).
void NormalizeSubscripts(std::vector<JinjaToken>* tokens) {
  std::vector<JinjaToken>& t = *tokens;
  std::vector<JinjaToken> out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    const bool is_subscript =
        i + 2 < t.size() && t[i] == JinjaToken{JinjaTokenKind::kOperator, "["} &&
        t[i + 1].kind == JinjaTokenKind::kString && IsIdentifier(t[i + 1].value) &&
        t[i + 2] == JinjaToken{JinjaTokenKind::kOperator, "]"} && !out.empty() &&
        (out.back().kind == JinjaTokenKind::kName || out.back().value == ")" ||
         out.back().value == "]");
    if (is_subscript) {
      out.push_back({JinjaTokenKind::kOperator, ".", t[i].line});
      out.push_back({JinjaTokenKind::kName, t[i + 1].value, t[i + 1].line});
      i += 2;
    } else {
      out.push_back(std::move(t[i]));
    }
  }
  t = std::move(out);
}

std::vector<JinjaToken> Lexer::Emit() {
  std::vector<JinjaToken> out;
  for (size_t i = 0; i < texts_.size(); ++i) {
    const RawTag* prev = i > 0 ? &tags_[i - 1] : nullptr;
    const RawTag* next = i < tags_.size() ? &tags_[i] : nullptr;
    std::string_view text = TrimText(texts_[i], prev, next);
    if (!text.empty()) {
      if (!out.empty() && out.back().kind == JinjaTokenKind::kText) {
        out.back().value.append(text);  // texts around a dropped comment join up
      } else {
        out.push_back({JinjaTokenKind::kText, std::string(text),
                       LineOf(static_cast<size_t>(text.data() - src_.data()))});
      }
    }
    if (next == nullptr || next->kind == TagKind::kComment) continue;
    const bool expr = next->kind == TagKind::kExpr;
    out.push_back({expr ? JinjaTokenKind::kExprBegin : JinjaTokenKind::kStmtBegin, "", next->line});
    std::vector<JinjaToken> body = next->tokens;
    NormalizeSubscripts(&body);
    for (JinjaToken& token : body) out.push_back(std::move(token));
    out.push_back({expr ? JinjaTokenKind::kExprEnd : JinjaTokenKind::kStmtEnd, "",
                   out.back().line});
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<JinjaToken>> TokenizeJinja(std::string_view source) {
  Lexer lexer(source);
  if (absl::Status s = lexer.Split(); !s.ok()) return s;
  return lexer.Emit();
}

std::string JinjaTokensDebugString(const std::vector<JinjaToken>& tokens) {
  std::string out;
  for (const JinjaToken& token : tokens) {
    if (!out.empty()) out.push_back(' ');
    switch (token.kind) {
      case JinjaTokenKind::kText:
        absl::StrAppend(&out, "text(\"", absl::CEscape(token.value), "\")");
        break;
      case JinjaTokenKind::kExprBegin: out.append("{{"); break;
      case JinjaTokenKind::kExprEnd: out.append("}}"); break;
      case JinjaTokenKind::kStmtBegin: out.append("{%"); break;
      case JinjaTokenKind::kStmtEnd: out.append("%}"); break;
      case JinjaTokenKind::kString:
        absl::StrAppend(&out, "'", absl::CEscape(token.value), "'");
        break;
      default: out.append(token.value); break;
    }
  }
  return out;
}

}  // namespace tessera::chat
