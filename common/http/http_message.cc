#include "common/http/http_message.h"

#include "absl/strings/match.h"
#include "common/util/absl_compat.h"

namespace tessera::http {

std::optional<std::string_view> Request::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, util::ToAbsl(name))) return std::string_view(value);
  }
  return std::nullopt;
}

}  // namespace tessera::http
