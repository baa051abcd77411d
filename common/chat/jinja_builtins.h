// The filters, tests, global functions and methods (str, dict, list) chat templates call, with
// Python's and jinja2's semantics, and Hugging Face's environment: `tojson` as json.dumps with
// ensure_ascii=False (HF's override, no HTML escaping), `raise_exception`, `strftime_now`.
// An unknown name is INVALID_ARGUMENT naming it ("unknown filter 'xmlattr'"). Thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "common/chat/jinja_value.h"

namespace tessera::chat::jinja {

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, CallArgs& args);
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& input, CallArgs& args);
// `value.name`: a dict's key, else a bound method of strings, dicts and lists; undefined if none.
Value GetAttribute(const Value& value, std::string_view name);
// Whether `value.name` is one of the string or dict methods templates call (a dict's own key
// of that name wins); CallMethod calls it (`value.name(args)` without a bound function).
bool IsMethodOf(const Value& value, std::string_view name);
absl::StatusOr<Value> CallMethod(const Value& self, std::string_view name, CallArgs& args);
// `value[index]`: list index (negative from the end), dict key, string byte; undefined if none.
Value GetItem(const Value& value, const Value& index);
// json.dumps(value, ensure_ascii=False, indent=indent (< 0: none), sort_keys).
std::string ToJson(const Value& value, int indent, bool sort_keys);
// The global functions: namespace, range, raise_exception, strftime_now, dict.
Value GlobalFunction(std::string_view name);

}  // namespace tessera::chat::jinja
