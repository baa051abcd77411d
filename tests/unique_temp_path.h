// A file path under gtest's TempDir() that no other test process uses. CTest runs every test
// case as its own process, in parallel with -j: a fixed file name would be written by two of them
// at once (the other reads a half-written file).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace tessera::testing_util {

inline std::string UniqueTempPath(std::string_view name) {
  return (std::filesystem::path(::testing::TempDir()) /
          (std::to_string(getpid()) + "_" + std::string(name)))
      .string();
}

}  // namespace tessera::testing_util
