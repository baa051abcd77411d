#include "router/console/console_assets.h"

namespace tessera::router::console {
namespace {

constexpr std::string_view kAssetPrefix = "/console/";

std::string_view ContentTypeOf(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

}  // namespace

std::optional<ConsoleAsset> FindConsoleAsset(std::string_view path) {
  std::string_view name;
  if (path == "/") {
    name = "index.html";
  } else if (path.starts_with(kAssetPrefix)) {
    name = path.substr(kAssetPrefix.size());
  } else {
    return std::nullopt;
  }
  for (size_t i = 0; i < kConsoleFilesCount; ++i) {
    if (kConsoleFiles[i].name == name) {
      return ConsoleAsset{ContentTypeOf(name), kConsoleFiles[i].bytes};
    }
  }
  return std::nullopt;
}

}  // namespace tessera::router::console
