// Parses a Jinja chat template (the token stream of jinja_lexer.h, whitespace control already
// applied as Hugging Face renders templates) into a syntax tree (jinja_ast.h). The grammar is
// jinja2's: statements if/elif/else, for (with an `if` filter and `else`), set (also block set
// and `set ns.attr`), macro, break/continue, generation; expressions with jinja2's precedence
// (conditional, or, and, not, comparisons and `in`, + -, ~, * / // %, **, unary -, then
// attribute, subscript, slice, call, `|` filters and `is` tests), list/tuple/dict literals.
// Anything else is INVALID_ARGUMENT naming the construct (e.g. "unsupported statement 'call'").
// Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "common/chat/jinja_ast.h"

namespace tessera::chat::jinja {

absl::StatusOr<Body> ParseTemplate(std::string_view source);

}  // namespace tessera::chat::jinja
