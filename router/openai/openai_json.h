// Small helpers every OpenAI request parser shares: the body's JSON type (the client's key order
// kept, for tool and response schemas), field lookup, and the "<field> <problem>" error.
//
// Threading: pure functions; HTTP handler threads.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"

namespace tessera::router::openai {

using Json = nlohmann::ordered_json;

// INVALID_ARGUMENT "<field> <problem>".
inline absl::Status Invalid(std::string_view field, std::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(util::ToAbsl(field), " ", util::ToAbsl(problem)));
}

// The field when present and not null.
inline const Json* Field(const Json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace tessera::router::openai
