#include "common/chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"

namespace tessera::chat::jinja {

Text Text::Content(std::string s) {
  Text t{std::move(s), {}};
  if (!t.bytes.empty()) t.content_runs.push_back({0, t.bytes.size()});
  return t;
}

bool Text::IsContent(size_t i) const {
  auto after = std::upper_bound(content_runs.begin(), content_runs.end(), i,
                                [](size_t at, const Run& run) { return at < run.first; });
  return after != content_runs.begin() && i < std::prev(after)->second;
}

void Text::Append(const Text& other) {
  const size_t shift = bytes.size();
  for (const Run& run : other.content_runs) {
    if (!content_runs.empty() && content_runs.back().second == run.first + shift) {
      content_runs.back().second = run.second + shift;  // continues the last run
    } else {
      content_runs.push_back({run.first + shift, run.second + shift});
    }
  }
  bytes.append(other.bytes);
}

Text Text::Slice(size_t begin, size_t end) const {
  Text out{bytes.substr(begin, end - begin), {}};
  for (const Run& run : content_runs) {
    const size_t from = std::max(run.first, begin), to = std::min(run.second, end);
    if (from < to) out.content_runs.push_back({from - begin, to - begin});
  }
  return out;
}

Text Text::Retagged(std::string bytes_out, bool any) const {
  return any ? Content(std::move(bytes_out)) : Markup(std::move(bytes_out));
}

const Value* Object::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::Set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Array& Value::array() const {
  TESSERA_CHECK(kind_ == Kind::kArray, "jinja: array() of a value that is not a list");
  return *payload<Array>();
}

Object& Value::object() const {
  TESSERA_CHECK(kind_ == Kind::kObject, "jinja: object() of a value that is not a dict");
  return *payload<Object>();
}

const Function& Value::function() const {
  TESSERA_CHECK(kind_ == Kind::kFunction, "jinja: function() of a value that is not callable");
  return *payload<Function>();
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t CodePointCount(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::vector<Value> Characters(const Value& string) {
  const std::vector<size_t> at = CodePointOffsets(string.str());
  std::vector<Value> out;
  out.reserve(at.size() - 1);
  for (size_t k = 0; k + 1 < at.size(); ++k) {
    out.push_back(Value::String(string.text().Slice(at[k], at[k + 1])));
  }
  return out;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.d_ = d;
  return v;
}
const Text& Value::EmptyText() {
  static const Text kEmpty;
  return kEmpty;
}

Value Value::String(Text text) {
  Value v;
  v.kind_ = Kind::kString;
  v.payload_ = std::make_shared<Text>(std::move(text));
  return v;
}
Value Value::MakeArray(Array items) {
  Value v;
  v.kind_ = Kind::kArray;
  v.payload_ = std::make_shared<Array>(std::move(items));
  return v;
}
Value Value::MakeObject(Object object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.payload_ = std::make_shared<Object>(std::move(object));
  return v;
}
Value Value::MakeNamespace(Object object) {
  Value v = MakeObject(std::move(object));
  v.namespace_ = true;
  return v;
}
Value Value::MakeFunction(Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.payload_ = std::make_shared<Function>(std::move(fn));
  return v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return d_ != 0.0;
    case Kind::kString: return !str().empty();
    case Kind::kArray: return !array().empty();
    case Kind::kObject: return namespace_ || !object().items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

bool Value::Equals(const Value& other) const {
  const bool numeric = (is_number() || kind_ == Kind::kBool) &&
                       (other.is_number() || other.kind_ == Kind::kBool);
  if (numeric) {
    const double a = kind_ == Kind::kBool ? (b_ ? 1.0 : 0.0) : AsDouble();
    const double b = other.kind_ == Kind::kBool ? (other.b_ ? 1.0 : 0.0) : other.AsDouble();
    return a == b;
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return str() == other.str();
    case Kind::kArray: {
      if (array().size() != other.array().size()) return false;
      for (size_t i = 0; i < array().size(); ++i) {
        if (!array()[i].Equals(other.array()[i])) return false;
      }
      return true;
    }
    case Kind::kObject: {
      if (object().items.size() != other.object().items.size()) return false;
      for (const auto& [k, v] : object().items) {
        const Value* o = other.object().Find(k);
        if (o == nullptr || !v.Equals(*o)) return false;
      }
      return true;
    }
    default: return this == &other || payload_ == other.payload_;
  }
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, d);
    if (std::strtod(buffer, nullptr) == d) break;
  }
  std::string s = buffer;
  const size_t e = s.find('e');
  if (e != std::string::npos) {  // Python: 1e+20, 1e-05 (two-digit exponent at least)
    std::string mantissa = s.substr(0, e);
    std::string exponent = s.substr(e + 1);
    const char sign = exponent[0] == '-' ? '-' : '+';
    if (exponent[0] == '-' || exponent[0] == '+') exponent = exponent.substr(1);
    while (exponent.size() > 2 && exponent[0] == '0') exponent = exponent.substr(1);
    if (std::abs(d) >= 1e16 || std::abs(d) < 1e-4) return mantissa + "e" + sign + exponent;
  }
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void Value::AppendTextTo(Text* out) const {
  if (kind_ == Kind::kString) {
    out->Append(text());
  } else {
    out->Append(ToText());
  }
}

Text Value::ToText() const {
  switch (kind_) {
    case Kind::kUndefined: return {};
    case Kind::kString: return text();
    case Kind::kNone: return Text::Markup("None");
    case Kind::kBool: return Text::Markup(b_ ? "True" : "False");
    case Kind::kInt: return Text::Markup(std::to_string(i_));
    case Kind::kFloat: return Text::Markup(FloatRepr(d_));
    default: {
      // Containers print as Python's repr; any content inside makes it content.
      bool any = false;
      std::function<void(const Value&)> scan = [&](const Value& v) {
        if (v.is_string() && v.text().AnyContent()) any = true;
        if (v.is_array()) for (const Value& e : v.array()) scan(e);
        if (v.is_object()) for (const auto& kv : v.object().items) scan(kv.second);
      };
      scan(*this);
      return Text{}.Retagged(Repr(), any);
    }
  }
}

std::string PythonStringRepr(const std::string& s) {
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = use_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back(quote);
  return out;
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kString: return PythonStringRepr(str());
    case Kind::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < array().size(); ++i) {
        if (i > 0) out += ", ";
        out += array()[i].Repr();
      }
      return out + "]";
    }
    case Kind::kObject: {
      if (namespace_) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < object().items.size(); ++i) {
        if (i > 0) out += ", ";
        absl::StrAppend(&out, PythonStringRepr(object().items[i].first), ": ",
                        object().items[i].second.Repr());
      }
      return out + "}";
    }
    case Kind::kUndefined: return "";
    case Kind::kFunction: return "<function>";
    default: return ToText().bytes;
  }
}

std::string_view Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "boolean";
    case Kind::kInt: return "integer";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kArray: return "list";
    case Kind::kObject: return namespace_ ? "namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

const Value& CallArgs::Get(std::string_view name, size_t index) const {
  static const Value kUndefined;
  for (const auto& [k, v] : keyword) {
    if (k == name) return v;
  }
  return index < positional.size() ? positional[index] : kUndefined;
}

}  // namespace tessera::chat::jinja
