#include "tools/cli/default_model.h"

#include <filesystem>
#include <system_error>

#include "tools/cli/commands.h"

namespace tessera::cli {

std::string FindDefaultModel() {
  std::error_code error;
  if (std::filesystem::exists(kDefaultModelPath, error)) return kDefaultModelPath;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return kDefaultModelPath;
  const std::filesystem::path bin = exe.parent_path();
  for (const std::filesystem::path& root : {bin.parent_path().parent_path(), bin.parent_path()}) {
    const std::filesystem::path candidate = root / kDefaultModelPath;
    if (std::filesystem::exists(candidate, error)) return candidate.string();
  }
  return kDefaultModelPath;
}

}  // namespace tessera::cli
