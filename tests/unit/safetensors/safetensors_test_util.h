// Helpers for the safetensors tests: fresh temporary directories, raw files, hand-made
// .safetensors images (any header text, so tests can corrupt it).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/unique_temp_path.h"

namespace tessera::safetensors::testing {

// An empty directory no other test process uses.
inline std::string FreshDir(std::string_view name) {
  const std::string dir = testing_util::UniqueTempPath(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline void WriteText(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// The 8-byte little-endian length of `header`, `header`, then `data`.
inline std::vector<uint8_t> Image(std::string_view header, const std::vector<uint8_t>& data,
                                  uint64_t length_field) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(length_field >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}
inline std::vector<uint8_t> Image(std::string_view header, const std::vector<uint8_t>& data) {
  return Image(header, data, header.size());
}

}  // namespace tessera::safetensors::testing
