// Where the CLI finds the default model (kDefaultModelPath, models/... as scripts/fetch_model.sh
// puts it) when --model is not given: relative to the current directory if it is there, else
// relative to the install — the checkout above build/bin/, or <prefix>/ above bin/ — so
// `build/bin/tessera serve` works from any directory. Main thread, at start-up.
#pragma once

#include <string>

namespace tessera::cli {

// kDefaultModelPath when it exists here, else the first install-relative copy that exists, else
// kDefaultModelPath (whose "no such file" then names the usual place).
std::string FindDefaultModel();

}  // namespace tessera::cli
