// OpenAI's logit_bias shape, read by the OpenAI door (`logit_bias`) and the LocalAI door
// (`LogitBias`, a JSON string of the same object): token ids as object keys (strings of digits)
// mapped to numbers. The ids' range and the biases' bound are checked when the request is built
// (request_builder.h), against the model's vocabulary.
//
// Threading: pure function; the doors' request threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router {

// Sets request->logit_bias from `object` (nlohmann::json or ordered_json); otherwise
// INVALID_ARGUMENT "<field> ..." naming the problem.
template <typename JsonT>
absl::Status SetLogitBiasFromJson(const JsonT& object, std::string_view field,
                                  v1::GenerateRequest* request) {
  const auto invalid = [field](std::string_view problem) {
    return absl::InvalidArgumentError(
        absl::StrCat(util::ToAbsl(field), " ", util::ToAbsl(problem)));
  };
  if (!object.is_object()) return invalid("must be an object of token id -> bias");
  for (const auto& [key, value] : object.items()) {
    int32_t id = 0;
    const bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || !absl::SimpleAtoi(key, &id)) {
      return invalid(absl::StrCat("has the key \"", key.substr(0, 32),
                                  "\", which is not a token id"));
    }
    if (!value.is_number()) return invalid("values must be numbers");
    (*request->mutable_logit_bias())[id] = static_cast<float>(value.template get<double>());
  }
  return absl::OkStatus();
}

}  // namespace tessera::router
