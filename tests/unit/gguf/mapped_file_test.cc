#include "common/util/mapped_file.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unique_temp_path.h"

namespace tessera::util {
namespace {

using testing_util::UniqueTempPath;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

std::string WriteFile(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = UniqueTempPath(name);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

bool SameBytes(const MappedFile& file, const std::vector<uint8_t>& bytes) {
  return file.size() == bytes.size() &&
         std::memcmp(file.bytes().data(), bytes.data(), bytes.size()) == 0;
}

// Sizes around page and huge-page boundaries: a partial last page, exactly 2 MiB, and more than
// one huge page with an odd tail.
TEST(MappedFileTest, MapAndHugePageCopyHoldTheFileBytes) {
  for (size_t size : {size_t{1}, size_t{4097}, size_t{2} << 20, (size_t{5} << 20) + 123}) {
    const auto bytes = RandomBytes(size, static_cast<uint32_t>(size));
    const std::string path = WriteFile("mapped_" + std::to_string(size), bytes);
    for (FileLoad load : {FileLoad::kMap, FileLoad::kHugePageCopy}) {
      auto file = MappedFile::Open(path, load);
      ASSERT_TRUE(file.ok()) << file.status();
      EXPECT_TRUE(SameBytes(*file, bytes)) << "size " << size;
    }
    std::filesystem::remove(path);
  }
}

TEST(MappedFileTest, HugePageCopyStartsOnA2MiBBoundary) {
  const auto bytes = RandomBytes((size_t{3} << 20) + 7, 3);
  const std::string path = WriteFile("aligned", bytes);
  auto file = MappedFile::Open(path, FileLoad::kHugePageCopy);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(file->bytes().data()) % (uintptr_t{2} << 20), 0u);
  std::filesystem::remove(path);
}

// Release hands the caller exactly what Unmap must free; after it the object owns nothing.
TEST(MappedFileTest, ReleasedCopyIsFreedByUnmap) {
  const auto bytes = RandomBytes(10000, 4);
  const std::string path = WriteFile("release", bytes);
  auto file = MappedFile::Open(path, FileLoad::kHugePageCopy);
  ASSERT_TRUE(file.ok()) << file.status();
  auto [data, size] = file->Release();
  EXPECT_EQ(size, bytes.size());
  EXPECT_EQ(file->size(), 0u);
  EXPECT_EQ(std::memcmp(data, bytes.data(), size), 0);
  MappedFile::Unmap(data, size);
  std::filesystem::remove(path);
}

TEST(MappedFileTest, ErrorsNameThePath) {
  const std::string missing = UniqueTempPath("does_not_exist.gguf");
  const std::string empty = WriteFile("empty", {});
  const std::string directory = ::testing::TempDir();
  for (FileLoad load : {FileLoad::kMap, FileLoad::kHugePageCopy}) {
    auto absent = MappedFile::Open(missing, load);
    EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
    EXPECT_NE(absent.status().message().find(missing), std::string::npos);
    EXPECT_EQ(MappedFile::Open(empty, load).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(MappedFile::Open(directory, load).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  std::filesystem::remove(empty);
}

// The copy is made read-only like the mapping: a stray write faults instead of silently
// changing weights.
TEST(MappedFileDeathTest, HugePageCopyIsReadOnly) {
  const auto bytes = RandomBytes(8192, 5);
  const std::string path = WriteFile("readonly", bytes);
  auto file = MappedFile::Open(path, FileLoad::kHugePageCopy);
  ASSERT_TRUE(file.ok()) << file.status();
  auto* writable = const_cast<uint8_t*>(file->bytes().data());
  EXPECT_DEATH(writable[100] = 1, "");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera::util
