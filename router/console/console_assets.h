// The web console's files (router/console/web/), compiled into the binary at build time
// (cmake/EmbedFiles.cmake), so the page works air-gapped and always matches the server.
//
// Threading: immutable data; any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace tessera::router::console {

struct EmbeddedFile {
  std::string_view name;   // base name, e.g. "console.js"
  std::string_view bytes;
};

// Generated (console_assets_data.cc): every file of router/console/web/.
extern const EmbeddedFile kConsoleFiles[];
extern const size_t kConsoleFilesCount;

struct ConsoleAsset {
  std::string_view content_type;
  std::string_view body;
};

// The asset served at URL path `path`: "/" is index.html, "/console/NAME" the file NAME;
// nullopt for anything else.
std::optional<ConsoleAsset> FindConsoleAsset(std::string_view path);

}  // namespace tessera::router::console
