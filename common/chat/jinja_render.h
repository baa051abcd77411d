// Renders a parsed Jinja chat template (jinja_parser.h) with jinja2's semantics as Hugging Face
// configures it (trim_blocks, lstrip_blocks, loop controls, no autoescape): scoping as jinja2
// (a `set` inside a for loop stays in that iteration; namespaces carry state out), `loop.*`,
// macros with defaults, filters/tests/methods from jinja_builtins.h.
//
// The output is Text: the bytes the template emits, each marked markup or content
// (jinja_value.h), so a caller can tokenize message content as plain text.
//
// Limits that keep a hostile template or conversation bounded: at most kMaxOutputBytes of output
// and kMaxSteps statements and expression nodes per render, macro recursion at most
// kMaxCallDepth; past them, RESOURCE_EXHAUSTED. Errors from the template (raise_exception, an
// unknown filter, a type error) are INVALID_ARGUMENT naming them.
//
// Thread-safe: a Template is immutable; each Render uses its own state.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/chat/jinja_ast.h"
#include "common/chat/jinja_value.h"

namespace tessera::chat::jinja {

inline constexpr size_t kMaxOutputBytes = size_t{16} << 20;
inline constexpr int64_t kMaxSteps = 10'000'000;
inline constexpr int kMaxCallDepth = 64;

class Template {
 public:
  static absl::StatusOr<Template> Parse(std::string_view source);
  // Renders with `context` (a dict: messages, tools, add_generation_prompt, bos_token, ...).
  absl::StatusOr<Text> Render(const Object& context) const;

 private:
  explicit Template(std::shared_ptr<const Body> body) : body_(std::move(body)) {}
  std::shared_ptr<const Body> body_;
};

}  // namespace tessera::chat::jinja
