#include "common/util/client_json.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"

namespace tessera::util {
namespace {

// A client's key echoed in an error message is cut short: the message is not a place to copy
// kilobytes of someone else's text into.
constexpr size_t kMaxFieldInMessage = 64;

template <typename Json>
absl::StatusOr<Json> ParseUnderCap(std::string_view text, std::string_view document,
                                   int max_depth) {
  std::optional<std::string> field;     // the top-level key whose value is being parsed
  std::optional<std::string> too_deep;  // where the nesting first went past the cap
  // nlohmann calls back with `depth` = the number of containers enclosing the event: 0 for the
  // top-level value, 1 for the top-level object's keys and values. Returning false on a
  // container's start drops that container (parsing goes on, iteratively, to report bad JSON).
  const typename Json::parser_callback_t callback = [&](int depth, typename Json::parse_event_t event,
                                                         Json& parsed) {
    switch (event) {
      case Json::parse_event_t::key:
        if (depth == 1) field = parsed.template get_ref<const std::string&>();
        return true;
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth < max_depth) return true;  // this container is level depth + 1
        if (!too_deep.has_value()) too_deep = field.has_value() ? *field : std::string(document);
        return false;
      default:
        return true;
    }
  };
  Json json = Json::parse(text, callback, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(document), " is not valid JSON"));
  }
  if (too_deep.has_value()) {
    const std::string name = too_deep->size() > kMaxFieldInMessage
                                 ? absl::StrCat(too_deep->substr(0, kMaxFieldInMessage), "...")
                                 : *too_deep;
    return absl::InvalidArgumentError(
        absl::StrCat(name, " nests deeper than ", max_depth, " levels"));
  }
  return json;
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseClientJson(std::string_view text, std::string_view document,
                                               int max_depth) {
  return ParseUnderCap<nlohmann::json>(text, document, max_depth);
}

absl::StatusOr<nlohmann::ordered_json> ParseClientOrderedJson(std::string_view text,
                                                              std::string_view document,
                                                              int max_depth) {
  return ParseUnderCap<nlohmann::ordered_json>(text, document, max_depth);
}

}  // namespace tessera::util
