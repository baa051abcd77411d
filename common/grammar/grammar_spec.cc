#include "common/grammar/grammar_spec.h"

#include <cstdio>
#include <exception>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"

namespace tessera::grammar {
namespace {

// xgrammar's errors start with its log prefix ("[hh:mm:ss] /path/file.cc:123: "); the client
// needs only the message after it.
std::string WithoutLogPrefix(std::string_view message) {
  if (message.empty() || message.front() != '[') return std::string(message);
  const size_t file_end = message.find(": ");
  if (file_end == std::string_view::npos) return std::string(message);
  std::string_view rest = message.substr(file_end + 2);
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) rest.remove_suffix(1);
  return std::string(rest);
}

xgrammar::Grammar ParseWithXgrammar(const GrammarSpec& spec) {
  switch (spec.kind) {
    case GrammarKind::kJsonObject:
      return xgrammar::Grammar::FromJSONSchema(R"({"type": "object"})", /*any_whitespace=*/false);
    case GrammarKind::kJsonSchema:
      return xgrammar::Grammar::FromJSONSchema(spec.text, /*any_whitespace=*/false,
                                               /*indent=*/std::nullopt,
                                               /*separators=*/std::nullopt,
                                               /*strict_mode=*/true);
    case GrammarKind::kRegex:
      return xgrammar::Grammar::FromRegex(spec.text);
    case GrammarKind::kEbnf:
      return xgrammar::Grammar::FromEBNF(spec.text, "root");
  }
  std::abort();
}

// One EBNF string literal: quotes and backslashes escaped, control bytes as \u00XX (xgrammar's
// \x takes every hex digit that follows), other UTF-8 as is.
void AppendEbnfLiteral(std::string_view text, std::string* out) {
  out->push_back('"');
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", byte);
      out->append(escaped);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

}  // namespace

std::string_view GrammarKindName(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonObject: return "json_object";
    case GrammarKind::kJsonSchema: return "json_schema";
    case GrammarKind::kRegex: return "regex";
    case GrammarKind::kEbnf: return "grammar";
  }
  return "unknown";
}

absl::StatusOr<xgrammar::Grammar> ParseGrammar(const GrammarSpec& spec) {
  const std::string_view name = GrammarKindName(spec.kind);
  if (spec.text.size() > kMaxGrammarBytes) {
    return absl::InvalidArgumentError(absl::StrCat(util::ToAbsl(name), " is ", spec.text.size(),
                                                   " bytes; at most ", kMaxGrammarBytes));
  }
  if (spec.kind != GrammarKind::kJsonObject && spec.text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(util::ToAbsl(name), " is empty"));
  }
  try {
    return ParseWithXgrammar(spec);
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(util::ToAbsl(name), " is invalid: ", WithoutLogPrefix(error.what())));
  }
}

absl::StatusOr<std::string> ChoiceGrammar(std::span<const std::string> choices) {
  if (choices.empty()) return absl::InvalidArgumentError("guided_choice is empty");
  if (choices.size() > kMaxChoices) {
    return absl::InvalidArgumentError(
        absl::StrCat("guided_choice has ", choices.size(), " entries; at most ", kMaxChoices));
  }
  std::string ebnf = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("guided_choice[", i, "] is empty"));
    }
    if (i > 0) ebnf += " | ";
    AppendEbnfLiteral(choices[i], &ebnf);
  }
  return ebnf;
}

}  // namespace tessera::grammar
