// Jinja template lexer that produces a canonical token stream, used to recognize chat templates
// by structure instead of by exact bytes.
//
// Two template sources that render identically in the common cases usually differ only in
// spelling: whitespace inside tags, quote style, `'\n'` escapes vs raw newlines, `x['key']` vs
// `x.key`, comments, and indentation that whitespace control removes. The canonical stream
// erases exactly those differences and nothing else, so equal streams mean equal programs.
//
// Whitespace handling follows how Hugging Face renders chat templates (jinja2 with
// trim_blocks=True, lstrip_blocks=True) plus explicit `-`/`+` markers, so kText tokens hold the
// text the template really emits.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::chat {

enum class JinjaTokenKind {
  kText,       // literal output between tags, after whitespace control
  kExprBegin,  // {{
  kExprEnd,    // }}
  kStmtBegin,  // {%
  kStmtEnd,    // %}
  kName,       // identifier or keyword (for, in, if, and, not, ...)
  kString,     // string literal, value decoded (escapes resolved, quotes dropped)
  kNumber,     // numeric literal as written
  kOperator,   // == != + ( ) [ ] . , | ~ ...
};

struct JinjaToken {
  JinjaTokenKind kind;
  std::string value;  // empty for the begin/end kinds
  int line = 0;       // 1-based source line where it starts (not part of equality)
  bool operator==(const JinjaToken& other) const {
    return kind == other.kind && value == other.value;
  }
};

// Tokenizes `source`. Comments are dropped; `x['name']` is rewritten to `x.name` when 'name' is
// an identifier. INVALID_ARGUMENT (naming the byte offset) for an unterminated tag, comment or
// string literal.
absl::StatusOr<std::vector<JinjaToken>> TokenizeJinja(std::string_view source);

// Compact rendering for diagnostics and tests, e.g. `{% for message in messages %}`.
std::string JinjaTokensDebugString(const std::vector<JinjaToken>& tokens);

}  // namespace tessera::chat
