// Where a test finds the tessera binaries it starts: its own directory. Every executable is
// built into one bin/ (CMAKE_RUNTIME_OUTPUT_DIRECTORY) and tools/gpu/bundle.sh packs tests and
// binaries into one bin/ too, so nothing depends on the build's absolute path.
#pragma once

#include <filesystem>
#include <string>

namespace tessera::testing_util {

inline std::string TesseraBinDir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

}  // namespace tessera::testing_util
