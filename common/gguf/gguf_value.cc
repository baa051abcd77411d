#include "common/gguf/gguf_value.h"

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/util/check.h"

namespace tessera::gguf {
namespace {

constexpr std::array<const char*, 13> kTypeNames = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

// Strings longer than this are shown truncated: chat templates and merges are kilobytes long and
// DebugString is for logs and `inspect` listings, not for getting the value back.
constexpr size_t kMaxDebugStringBytes = 96;

template <typename T>
inline constexpr bool kIsIntegerAlternative = std::is_integral_v<T> && !std::is_same_v<T, bool>;

std::string QuoteString(const std::string& s) {
  if (s.size() <= kMaxDebugStringBytes) return absl::StrCat("\"", absl::CEscape(s), "\"");
  return absl::StrCat("\"", absl::CEscape(s.substr(0, kMaxDebugStringBytes)), "\"... (", s.size(),
                      " bytes)");
}

}  // namespace

std::string GgufValueTypeName(GgufValueType type) {
  const auto id = static_cast<uint32_t>(type);
  if (id < kTypeNames.size()) return kTypeNames[id];
  return absl::StrCat("unknown(", id, ")");
}

bool GgufValue::IsInteger() const {
  return std::visit([](const auto& v) { return kIsIntegerAlternative<std::decay_t<decltype(v)>>; },
                    storage_);
}

bool GgufValue::IsFloat() const {
  return std::holds_alternative<float>(storage_) || std::holds_alternative<double>(storage_);
}

int64_t GgufValue::AsInt64() const {
  TESSERA_CHECK(IsInteger(), "GgufValue::AsInt64 on a non-integer value");
  if (const uint64_t* u = std::get_if<uint64_t>(&storage_)) {
    TESSERA_CHECK(*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                  "GgufValue::AsInt64: uint64 value does not fit int64");
    return static_cast<int64_t>(*u);
  }
  return std::visit(
      [](const auto& v) -> int64_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (kIsIntegerAlternative<T>) {
          return static_cast<int64_t>(v);
        } else {
          return 0;  // unreachable: IsInteger() was checked above
        }
      },
      storage_);
}

double GgufValue::AsDouble() const {
  TESSERA_CHECK(IsFloat() || IsInteger(), "GgufValue::AsDouble on a non-numeric value");
  return std::visit(
      [](const auto& v) -> double {
        using T = std::decay_t<decltype(v)>;
        if constexpr (kIsIntegerAlternative<T> || std::is_floating_point_v<T>) {
          return static_cast<double>(v);
        } else {
          return 0.0;  // unreachable: checked above
        }
      },
      storage_);
}

std::string GgufValue::DebugString(size_t max_elements) const {
  return std::visit(
      [max_elements](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return QuoteString(v);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          std::string out = "[";
          const size_t shown = std::min(max_elements, v.elements.size());
          for (size_t i = 0; i < shown; ++i) {
            if (i > 0) absl::StrAppend(&out, ", ");
            absl::StrAppend(&out, v.elements[i].DebugString(max_elements));
          }
          if (shown < v.elements.size()) {
            absl::StrAppend(&out, shown > 0 ? ", " : "", "... (", v.elements.size(), " items)");
          }
          absl::StrAppend(&out, "]");
          return out;
        } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
          return absl::StrCat(static_cast<int>(v));  // not as a character
        } else {
          return absl::StrCat(v);
        }
      },
      storage_);
}

}  // namespace tessera::gguf
