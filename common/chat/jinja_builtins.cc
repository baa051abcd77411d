#include "common/chat/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/util/absl_compat.h"

namespace tessera::chat::jinja {
namespace {

absl::Status Unknown(std::string_view what, std::string_view name) {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template: unknown ", util::ToAbsl(what), " '", util::ToAbsl(name), "'"));
}

absl::Status WrongType(std::string_view what, const Value& v) {
  return absl::InvalidArgumentError(absl::StrCat("chat template: ", util::ToAbsl(what),
                                                 " does not apply to a ",
                                                 util::ToAbsl(v.TypeName())));
}

bool IsSpaceByte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.strip family on Text, keeping each byte's provenance. `chars` empty: whitespace.
Text Strip(const Text& t, std::string_view chars, bool left, bool right) {
  auto strip = [&](char c) { return chars.empty() ? IsSpaceByte(c) : chars.find(c) != std::string_view::npos; };
  size_t begin = 0, end = t.bytes.size();
  while (left && begin < end && strip(t.bytes[begin])) ++begin;
  while (right && end > begin && strip(t.bytes[end - 1])) --end;
  return t.Slice(begin, end);
}

// The items a value iterates: a list's elements, a dict's keys, a string's characters.
std::vector<Value> Items(const Value& v) {
  if (v.is_array()) return v.array();
  std::vector<Value> out;
  if (v.is_object()) {
    for (const auto& kv : v.object().items) out.push_back(Value::Markup(kv.first));
  } else if (v.is_string()) {
    out = Characters(v);
  }
  return out;
}

void JsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "\\u%04x", c);
          *out += hex;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void Json(const Value& v, int indent, bool sort_keys, int depth, std::string* out) {
  // Built by append, not `"\n" + std::string(...)`: GCC 12 warns (-Wrestrict) on that at -O3.
  std::string newline, closing;
  if (indent >= 0) {
    newline.append(1, '\n').append(static_cast<size_t>((depth + 1) * indent), ' ');
    closing.append(1, '\n').append(static_cast<size_t>(depth * indent), ' ');
  }
  const std::string item_separator = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: *out += "null"; return;
    case Value::Kind::kBool: *out += v.AsBool() ? "true" : "false"; return;
    case Value::Kind::kInt: *out += std::to_string(v.AsInt()); return;
    case Value::Kind::kFloat: {
      const double d = v.AsDouble();
      *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : FloatRepr(d);
      return;
    }
    case Value::Kind::kString: JsonString(v.str(), out); return;
    case Value::Kind::kArray: {
      if (v.array().empty()) {
        *out += "[]";
        return;
      }
      *out += "[";
      for (size_t i = 0; i < v.array().size(); ++i) {
        if (i > 0) *out += item_separator;
        *out += newline;
        Json(v.array()[i], indent, sort_keys, depth + 1, out);
      }
      *out += closing + "]";
      return;
    }
    case Value::Kind::kObject: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.object().items) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      if (items.empty()) {
        *out += "{}";
        return;
      }
      *out += "{";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += item_separator;
        *out += newline;
        JsonString(items[i]->first, out);
        *out += ": ";
        Json(items[i]->second, indent, sort_keys, depth + 1, out);
      }
      *out += closing + "}";
      return;
    }
    case Value::Kind::kFunction: *out += "null"; return;
  }
}

bool AnyContent(const Value& v) {
  if (v.is_string()) return v.text().AnyContent();
  if (v.is_array()) {
    for (const Value& e : v.array()) if (AnyContent(e)) return true;
  }
  if (v.is_object()) {
    for (const auto& kv : v.object().items) if (AnyContent(kv.second)) return true;
  }
  return false;
}

// The attribute `attr` of an item ("a.b" walks dicts), as selectattr/map read it.
Value AttributePath(const Value& item, const std::string& attr) {
  Value v = item;
  for (absl::string_view part : absl::StrSplit(attr, '.')) v = GetAttribute(v, std::string(part));
  return v;
}

Value StringResult(const Value& from, std::string bytes) {
  return Value::String(from.text().Retagged(std::move(bytes), from.text().AnyContent()));
}

absl::StatusOr<Value> StringMethod(const Value& self, std::string_view name, CallArgs& args);
absl::StatusOr<Value> DictMethod(const Value& self, std::string_view name, CallArgs& args);

absl::StatusOr<Value> Join(const Value& input, CallArgs& args) {
  const Value& separator = args.Get("d", 0);
  const std::string attr = args.Get("attribute", 1).is_string() ? args.Get("attribute", 1).str() : "";
  Text out;
  bool first = true;
  for (const Value& item : Items(input)) {
    if (!first) separator.AppendTextTo(&out);
    first = false;
    (attr.empty() ? item : AttributePath(item, attr)).AppendTextTo(&out);
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> SelectOrReject(const Value& input, CallArgs& args, bool by_attr, bool select) {
  Array out;
  for (const Value& item : Items(input)) {
    size_t next = 0;
    Value subject = item;
    if (by_attr) subject = AttributePath(item, args.Get("", next++).str());
    bool keep = subject.Truthy();
    if (args.positional.size() > next) {
      CallArgs test_args;
      test_args.positional.assign(args.positional.begin() + next + 1, args.positional.end());
      absl::StatusOr<bool> passed = ApplyTest(args.positional[next].str(), subject, test_args);
      if (!passed.ok()) return passed.status();
      keep = *passed;
    }
    if (keep == select) out.push_back(item);
  }
  return Value::MakeArray(std::move(out));
}

absl::StatusOr<Value> Map(const Value& input, CallArgs& args) {
  Array out;
  const Value& attribute = args.Get("attribute", 99);
  for (const Value& item : Items(input)) {
    if (attribute.is_string()) {
      Value v = AttributePath(item, attribute.str());
      if (v.is_undefined() && !args.Get("default", 99).is_undefined()) v = args.Get("default", 99);
      out.push_back(v);
      continue;
    }
    CallArgs filter_args;
    if (args.positional.empty()) return absl::InvalidArgumentError("chat template: map needs a filter or attribute");
    filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
    absl::StatusOr<Value> v = ApplyFilter(args.positional[0].str(), item, filter_args);
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return Value::MakeArray(std::move(out));
}

absl::StatusOr<Value> Indent(const Value& input, CallArgs& args) {
  const Value& width = args.Get("width", 0);
  const std::string pad = width.is_string() ? width.str() : std::string(width.is_number() ? width.AsInt() : 4, ' ');
  const bool first = args.Get("first", 1).Truthy();
  const bool blank = args.Get("blank", 2).Truthy();
  std::string out;
  std::vector<std::string> lines = absl::StrSplit(input.str(), '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    const bool indent = (i > 0 || first) && (blank || !lines[i].empty());
    out += (indent ? pad : "") + lines[i];
  }
  return StringResult(input, std::move(out));
}

}  // namespace

std::string ToJson(const Value& value, int indent, bool sort_keys) {
  std::string out;
  Json(value, indent, sort_keys, 0, &out);
  return out;
}

Value GetItem(const Value& value, const Value& index) {
  if (value.is_array() && index.kind() == Value::Kind::kInt) {
    int64_t i = index.AsInt();
    const int64_t n = static_cast<int64_t>(value.array().size());
    if (i < 0) i += n;
    return i >= 0 && i < n ? value.array()[i] : Value();
  }
  if (value.is_string() && index.kind() == Value::Kind::kInt) {
    int64_t i = index.AsInt();
    const std::vector<size_t> at = CodePointOffsets(value.str());
    const int64_t n = static_cast<int64_t>(at.size()) - 1;
    if (i < 0) i += n;
    return i >= 0 && i < n ? Value::String(value.text().Slice(at[i], at[i + 1])) : Value();
  }
  if (value.is_object() && index.is_string()) {
    const Value* found = value.object().Find(index.str());
    if (found != nullptr) return *found;
    return GetAttribute(value, index.str());
  }
  return Value();
}

bool IsMethodOf(const Value& value, std::string_view name) {
  static constexpr std::string_view kStringMethods[] = {
      "strip", "lstrip", "rstrip", "startswith", "endswith", "upper", "lower", "find",
      "replace", "split", "rsplit", "title", "capitalize", "count", "join"};
  static constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get"};
  const auto known = [&](const auto& names) {
    return std::find(std::begin(names), std::end(names), name) != std::end(names);
  };
  if (value.is_object()) {
    return !value.is_namespace() && value.object().Find(name) == nullptr && known(kDictMethods);
  }
  return value.is_string() && known(kStringMethods);
}

absl::StatusOr<Value> CallMethod(const Value& self, std::string_view name, CallArgs& args) {
  return self.is_string() ? StringMethod(self, name, args) : DictMethod(self, name, args);
}

Value GetAttribute(const Value& value, std::string_view name) {
  if (value.is_object()) {
    if (const Value* found = value.object().Find(name)) return *found;
    if (value.is_namespace()) return Value();
  }
  if (!IsMethodOf(value, name)) return Value();
  const std::string method(name);
  const Value self = value;
  return Value::MakeFunction([self, method](CallArgs& args) -> absl::StatusOr<Value> {
    return self.is_string() ? StringMethod(self, method, args) : DictMethod(self, method, args);
  });
}

namespace {

absl::StatusOr<Value> StringMethod(const Value& self, std::string_view name, CallArgs& args) {
  const std::string& s = self.str();
  const Value& a0 = args.Get("", 0);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const std::string chars = a0.is_string() ? a0.str() : "";
    return Value::String(Strip(self.text(), chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith") return Value::Bool(s.starts_with(a0.str()));
  if (name == "endswith") return Value::Bool(s.ends_with(a0.str()));
  if (name == "upper") return StringResult(self, absl::AsciiStrToUpper(s));
  if (name == "lower") return StringResult(self, absl::AsciiStrToLower(s));
  if (name == "find") {
    const size_t at = s.find(a0.str());  // as a code point index, as Python counts
    if (at == std::string::npos) return Value::Int(-1);
    return Value::Int(static_cast<int64_t>(CodePointCount(std::string_view(s).substr(0, at))));
  }
  if (name == "replace") {
    std::string out;
    const std::string& from = a0.str();
    const std::string& to = args.Get("", 1).str();
    size_t at = 0;
    while (!from.empty()) {
      const size_t next = s.find(from, at);
      if (next == std::string::npos) break;
      out += s.substr(at, next - at) + to;
      at = next + from.size();
    }
    out += s.substr(at);
    return Value::String(self.text().Retagged(std::move(out), self.text().AnyContent() || args.Get("", 1).text().AnyContent()));
  }
  if (name == "split" || name == "rsplit") {
    Array out;
    if (a0.is_string()) {
      for (absl::string_view part : absl::StrSplit(s, a0.str())) out.push_back(StringResult(self, std::string(part)));
    } else {
      for (absl::string_view part : absl::StrSplit(s, absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty())) {
        out.push_back(StringResult(self, std::string(part)));
      }
    }
    return Value::MakeArray(std::move(out));
  }
  if (name == "title" || name == "capitalize") {
    std::string out = absl::AsciiStrToLower(s);
    bool start = true;
    for (size_t i = 0; i < out.size(); ++i) {
      if (start && absl::ascii_isalpha(out[i])) out[i] = absl::ascii_toupper(out[i]);
      start = name == "title" ? !absl::ascii_isalnum(out[i]) : false;
    }
    return StringResult(self, std::move(out));
  }
  if (name == "count") {
    int64_t n = 0;
    for (size_t at = s.find(a0.str()); !a0.str().empty() && at != std::string::npos; at = s.find(a0.str(), at + a0.str().size())) ++n;
    return Value::Int(n);
  }
  if (name == "join") {
    CallArgs join_args;
    join_args.positional.push_back(self);
    return Join(a0, join_args);
  }
  return Unknown("string method", name);
}

absl::StatusOr<Value> DictMethod(const Value& self, std::string_view name, CallArgs& args) {
  if (name == "items") {
    Array out;
    for (const auto& [k, v] : self.object().items) out.push_back(Value::MakeArray({Value::Markup(k), v}));
    return Value::MakeArray(std::move(out));
  }
  if (name == "keys" || name == "values") {
    Array out;
    for (const auto& [k, v] : self.object().items) out.push_back(name == "keys" ? Value::Markup(k) : v);
    return Value::MakeArray(std::move(out));
  }
  if (name == "get") {
    const Value* found = self.object().Find(args.Get("", 0).str());
    return found != nullptr ? *found : (args.positional.size() > 1 ? args.positional[1] : Value::None());
  }
  return Unknown("dict method", name);
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, CallArgs& args) {
  if (name == "trim") {
    const Value& chars = args.Get("chars", 0);
    const std::string_view strip = chars.is_string() ? std::string_view(chars.str()) : "";
    return Value::String(input.is_string() ? Strip(input.text(), strip, true, true)
                                           : Strip(input.ToText(), strip, true, true));
  }
  if (name == "tojson") {
    const Value& indent = args.Get("indent", 0);
    std::string json = ToJson(input, indent.is_number() ? static_cast<int>(indent.AsInt()) : -1,
                              args.Get("sort_keys", 99).Truthy());
    return Value::String(Text{}.Retagged(std::move(json), AnyContent(input)));
  }
  if (name == "length" || name == "count") {
    if (input.is_string()) {
      return Value::Int(static_cast<int64_t>(CodePointCount(input.str())));
    }
    if (input.is_array()) return Value::Int(static_cast<int64_t>(input.array().size()));
    if (input.is_object()) return Value::Int(static_cast<int64_t>(input.object().items.size()));
    if (input.is_undefined()) return Value::Int(0);
    return WrongType(absl::StrCat("filter '", util::ToAbsl(name), "'"), input);
  }
  if (name == "join") return Join(input, args);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    CallArgs none;
    return StringMethod(Value::String(input.ToText()), name, none);
  }
  if (name == "replace") return StringMethod(Value::String(input.ToText()), "replace", args);
  if (name == "default" || name == "d") {
    const bool boolean = args.Get("boolean", 1).Truthy();
    if (input.is_undefined() || (boolean && !input.Truthy())) return args.Get("default_value", 0);
    return input;
  }
  if (name == "items") {  // jinja2: nothing for undefined, a TypeError for a non-mapping
    if (input.is_undefined()) return Value::MakeArray();
    if (!input.is_object()) return WrongType("filter 'items'", input);
    return DictMethod(input, "items", args);
  }
  if (name == "list") return Value::MakeArray(Items(input));
  if (name == "first" || name == "last") {
    std::vector<Value> items = Items(input);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (input.is_string()) {
      const std::vector<Value> characters = Characters(input);
      Text out;
      for (auto c = characters.rbegin(); c != characters.rend(); ++c) out.Append(c->text());
      return Value::String(std::move(out));
    }
    std::vector<Value> items = Items(input);
    std::reverse(items.begin(), items.end());
    return Value::MakeArray(std::move(items));
  }
  if (name == "string") return input.is_string() ? input : Value::String(input.ToText());
  if (name == "safe" || name == "e" || name == "escape") return input;  // HF: no autoescape
  if (name == "int") {
    if (input.is_number()) return Value::Int(static_cast<int64_t>(input.AsDouble()));
    if (input.is_string()) return Value::Int(std::strtoll(input.str().c_str(), nullptr, 10));
    return Value::Int(args.Get("default", 0).is_number() ? args.Get("default", 0).AsInt() : 0);
  }
  if (name == "float") {
    if (input.is_number()) return Value::Float(input.AsDouble());
    if (input.is_string()) return Value::Float(std::strtod(input.str().c_str(), nullptr));
    return Value::Float(0.0);
  }
  if (name == "abs") return input.kind() == Value::Kind::kInt ? Value::Int(std::llabs(input.AsInt())) : Value::Float(std::fabs(input.AsDouble()));
  if (name == "selectattr" || name == "rejectattr") return SelectOrReject(input, args, true, name == "selectattr");
  if (name == "select" || name == "reject") return SelectOrReject(input, args, false, name == "select");
  if (name == "map") return Map(input, args);
  if (name == "indent") return Indent(input, args);
  if (name == "unique") {
    Array out;
    for (const Value& item : Items(input)) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return o.Equals(item); })) out.push_back(item);
    }
    return Value::MakeArray(std::move(out));
  }
  if (name == "wordcount") {
    std::vector<std::string> words = absl::StrSplit(input.str(), absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
    return Value::Int(static_cast<int64_t>(words.size()));
  }
  return Unknown("filter", name);
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v, CallArgs& args) {
  const Value& a0 = args.Get("", 0);
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == Value::Kind::kInt;
  if (name == "float") return v.kind() == Value::Kind::kFloat;
  if (name == "boolean") return v.kind() == Value::Kind::kBool;
  if (name == "true") return v.kind() == Value::Kind::kBool && v.AsBool();
  if (name == "false") return v.kind() == Value::Kind::kBool && !v.AsBool();
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_string() || v.is_object();
  if (name == "iterable") return v.is_array() || v.is_string() || v.is_object();
  if (name == "callable") return v.is_function();
  if (name == "odd" || name == "even") return v.is_number() && (v.AsInt() % 2 != 0) == (name == "odd");
  if (name == "divisibleby") return a0.AsInt() != 0 && v.AsInt() % a0.AsInt() == 0;
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return v.Equals(a0);
  if (name == "ne" || name == "!=") return !v.Equals(a0);
  if (name == "in") {
    if (a0.is_string()) return v.is_string() && a0.str().find(v.str()) != std::string::npos;
    for (const Value& item : Items(a0)) {
      if (item.Equals(v)) return true;
    }
    return false;
  }
  if (name == "lower") return v.is_string() && absl::AsciiStrToLower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && absl::AsciiStrToUpper(v.str()) == v.str();
  if (name == "gt" || name == "lt" || name == "ge" || name == "le") {
    if (!v.is_number() || !a0.is_number()) return WrongType(name, v);
    const double x = v.AsDouble(), y = a0.AsDouble();
    return name == "gt" ? x > y : name == "lt" ? x < y : name == "ge" ? x >= y : x <= y;
  }
  return Unknown("test", name);
}

Value GlobalFunction(std::string_view name) {
  if (name == "namespace") {
    return Value::MakeFunction([](CallArgs& args) -> absl::StatusOr<Value> {
      Object object;
      if (!args.positional.empty() && args.positional[0].is_object()) object = args.positional[0].object();
      for (const auto& [k, v] : args.keyword) object.Set(k, v);
      return Value::MakeNamespace(std::move(object));
    });
  }
  if (name == "dict") {
    return Value::MakeFunction([](CallArgs& args) -> absl::StatusOr<Value> {
      Object object;
      for (const auto& [k, v] : args.keyword) object.Set(k, v);
      return Value::MakeObject(std::move(object));
    });
  }
  if (name == "range") {
    return Value::MakeFunction([](CallArgs& args) -> absl::StatusOr<Value> {
      int64_t start = 0, stop = 0, step = 1;
      if (args.positional.size() == 1) {
        stop = args.positional[0].AsInt();
      } else if (args.positional.size() >= 2) {
        start = args.positional[0].AsInt();
        stop = args.positional[1].AsInt();
        if (args.positional.size() > 2) step = args.positional[2].AsInt();
      }
      if (step == 0) return absl::InvalidArgumentError("chat template: range() step is 0");
      Array out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        out.push_back(Value::Int(i));
        if (out.size() > 100000) return absl::InvalidArgumentError("chat template: range() too long");
      }
      return Value::MakeArray(std::move(out));
    });
  }
  if (name == "raise_exception") {
    return Value::MakeFunction([](CallArgs& args) -> absl::StatusOr<Value> {
      return absl::InvalidArgumentError(absl::StrCat("chat template: ", args.Get("", 0).str()));
    });
  }
  if (name == "strftime_now") {
    return Value::MakeFunction([](CallArgs& args) -> absl::StatusOr<Value> {
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buffer[256];
      const size_t n = std::strftime(buffer, sizeof(buffer), args.Get("", 0).str().c_str(), &local);
      return Value::Markup(std::string(buffer, n));
    });
  }
  return Value();
}

}  // namespace tessera::chat::jinja
