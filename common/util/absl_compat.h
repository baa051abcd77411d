// Debian 12's Abseil is built with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0),
// which does not convert from std::string_view. Our interfaces use std::string_view; this adapts
// them at the call sites of absl string utilities (StrCat, CEscape, ...).
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace tessera::util {

inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace tessera::util
