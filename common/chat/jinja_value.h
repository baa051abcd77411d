// The values a Jinja chat template computes with (common/chat/jinja_render.h), with Python's
// semantics where templates can observe them: truthiness, equality, str() and repr(), and
// reference semantics for lists, dicts and namespaces (a `namespace()` updated inside a loop is
// seen after it).
//
// Text remembers where its bytes came from: each byte is markup (the template's own literals)
// or content (a value the caller passed in: message text, tool arguments). Concatenation,
// slicing and trimming keep that per byte; any other transformation of content (upper, replace,
// tojson, ...) marks its whole result as content. The renderer's output is therefore split into
// markup and content pieces, and content is tokenized as plain text: no message can spell a
// control token into the prompt.
//
// Ownership: values are cheap to copy (lists/dicts are shared, as in Python). Not thread-safe:
// one render at a time uses its values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::chat::jinja {

// A string whose bytes are each markup or content, kept as the content byte ranges.
struct Text {
  using Run = std::pair<size_t, size_t>;  // [begin, end) of content bytes
  std::string bytes;
  std::vector<Run> content_runs;  // sorted, disjoint, never adjacent, never empty; none: all markup

  static Text Markup(std::string s) { return {std::move(s), {}}; }
  static Text Content(std::string s);
  bool IsContent(size_t i) const;
  bool AnyContent() const { return !content_runs.empty(); }
  void Append(const Text& other);
  void AppendMarkup(std::string_view markup) { bytes.append(markup); }
  Text Slice(size_t begin, size_t end) const;
  // The same bytes, all content when `any` (else all markup).
  Text Retagged(std::string bytes_out, bool any) const;
};

class Value;
using Array = std::vector<Value>;

// A dict keeping insertion order (Python's).
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
};

struct CallArgs;
using Function = std::function<absl::StatusOr<Value>(CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(Text text);
  static Value Markup(std::string s) { return String(Text::Markup(std::move(s))); }
  static Value Content(std::string s) { return String(Text::Content(std::move(s))); }
  static Value MakeArray(Array items = {});
  static Value MakeObject(Object object = {});
  static Value MakeFunction(Function fn);
  // A namespace(): an object whose attributes `set ns.x = ...` may assign.
  static Value MakeNamespace(Object object);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_namespace() const { return namespace_; }
  // No other value shares this one's list, dict or string (so it may be updated in place).
  bool unshared() const { return payload_.use_count() == 1; }

  bool AsBool() const { return b_; }
  int64_t AsInt() const { return i_; }
  double AsDouble() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : d_; }
  const Text& text() const { return kind_ == Kind::kString ? *payload<const Text>() : EmptyText(); }
  const std::string& str() const { return text().bytes; }
  // The container of a list, dict or function value; calling one on another kind is a bug
  // in the engine (a template's type errors are checked before) and aborts.
  Array& array() const;
  Object& object() const;
  const Function& function() const;

  // Python truthiness (undefined is false).
  bool Truthy() const;
  // Python ==: numbers by value, strings by bytes, lists/dicts element-wise.
  bool Equals(const Value& other) const;
  // str(value): what `{{ value }}` prints (undefined prints nothing). Content stays content.
  Text ToText() const;
  // The same, appended to `out` (a string's own Text, without a copy).
  void AppendTextTo(Text* out) const;
  // repr(value) as Python prints list and dict elements.
  std::string Repr() const;
  // A name for errors ("string", "list", "dict", ...).
  std::string_view TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  bool namespace_ = false;
  static const Text& EmptyText();

  // The shared payload of a string (an immutable Text), list (Array), dict or namespace
  // (Object) or function (Function), by kind_: one pointer, so a copy is one reference count.
  std::shared_ptr<void> payload_;
  template <typename T>
  T* payload() const { return static_cast<T*>(payload_.get()); }
};

// The arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument named `name`, else the positional one at `index`, else undefined.
  const Value& Get(std::string_view name, size_t index) const;
};

// Python strings count, index and slice code points, not bytes: the byte offset at which each
// code point of `s` starts (a byte that is not a UTF-8 continuation byte), then s.size().
std::vector<size_t> CodePointOffsets(std::string_view s);
size_t CodePointCount(std::string_view s);
// A string's characters (code points) as one-character strings, provenance kept.
std::vector<Value> Characters(const Value& string);

// Python's float repr (shortest round-trip, with ".0" for integral values).
std::string FloatRepr(double d);

}  // namespace tessera::chat::jinja
