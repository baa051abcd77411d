// GrammarSpec: a structured-output constraint as a request states it (a JSON schema, "any JSON
// object", a regular expression or an EBNF grammar), and its parse by xgrammar — the grammar
// engine that turns it into per-step token masks (worker/sampler/slot_grammars.h).
//
// The router parses every spec when the request arrives, so a bad schema, regex or grammar is a
// 400 naming the problem before anything is scheduled; the worker compiles the same spec against
// its vocabulary. Guided choice (a list of strings) becomes an EBNF grammar here, so the worker
// sees only the four kinds below.
//
// Threading: pure functions; any thread.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "xgrammar/grammar.h"

namespace tessera::grammar {

enum class GrammarKind {
  kJsonObject,  // any JSON object (OpenAI's response_format json_object); text unused
  kJsonSchema,  // text: a JSON Schema (response_format json_schema, guided_json)
  kRegex,       // text: a regular expression the whole output matches (guided_regex)
  kEbnf,        // text: an EBNF/GBNF grammar with a `root` rule (guided_grammar, LocalAI Grammar)
};

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonObject;
  std::string text;
};

// Bounds on what a client may send (the compile cost grows with it).
inline constexpr size_t kMaxGrammarBytes = 64 * 1024;
inline constexpr size_t kMaxChoices = 256;

std::string_view GrammarKindName(GrammarKind kind);  // "json_object", "json_schema", ...

// JSON output is compact (", " and ": " separators, no free whitespace), as a model that may
// emit whitespace forever under `any_whitespace` would never finish; strict: no properties
// beyond a schema's.
// INVALID_ARGUMENT "<kind> is invalid: <xgrammar's message>" (or naming the size limit).
absl::StatusOr<xgrammar::Grammar> ParseGrammar(const GrammarSpec& spec);

// An EBNF grammar whose only sentences are `choices` (each non-empty). INVALID_ARGUMENT for none,
// more than kMaxChoices, or an empty choice.
absl::StatusOr<std::string> ChoiceGrammar(std::span<const std::string> choices);

}  // namespace tessera::grammar
