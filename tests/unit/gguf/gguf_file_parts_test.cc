// GgufFile::FromParts: an assembled file reads like a parsed one (metadata, getters, tensor infos,
// TensorData pointing at the caller's bytes, which it keeps alive), and parts that break a parsed
// file's invariants are rejected naming the key or tensor.
#include <cstring>
#include <memory>
#include <vector>

#include "common/gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

using ::testing::HasSubstr;

GgufMetadataEntry Entry(std::string key, GgufValue::Storage value) {
  return {std::move(key), GgufValue(std::move(value))};
}

TEST(GgufFilePartsTest, ReadsLikeAParsedFile) {
  auto storage = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(storage->data()), 32);
  std::weak_ptr<std::vector<float>> watch = storage;
  auto file = GgufFile::FromParts(
      {Entry("general.architecture", std::string("llama")), Entry("llama.block_count", 2u)},
      {{"a", {2, 2}, GgmlType::kF32, bytes.subspan(0, 16)},
       {"b", {4}, GgmlType::kF32, bytes.subspan(16, 16)}},
      std::move(storage));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->GetString("general.architecture").value(), "llama");
  EXPECT_EQ((*file)->GetInt("llama.block_count").value(), 2);
  ASSERT_EQ((*file)->tensors().size(), 2u);
  const GgufTensorInfo* b = (*file)->FindTensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->num_elements, 4u);
  EXPECT_EQ(b->num_bytes, 16u);
  EXPECT_EQ(b->offset, 16u);
  EXPECT_EQ((*file)->TensorData(*b).data(), bytes.data() + 16);
  EXPECT_EQ((*file)->file_size(), 32u);
  EXPECT_EQ((*file)->version(), 0u);
  EXPECT_FALSE(watch.expired());  // the file keeps the storage
  file->reset();
  EXPECT_TRUE(watch.expired());
}

TEST(GgufFilePartsTest, RejectsWhatAParsedFileCannotHold) {
  const std::vector<uint8_t> bytes(64);
  const std::span<const uint8_t> all(bytes);
  struct Case {
    std::vector<GgufMetadataEntry> metadata;
    std::vector<GgufTensorPart> tensors;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{Entry("k", 1u), Entry("k", 2u)}, {}, "has the key 'k' twice"},
      {{},
       {{"t", {4}, GgmlType::kF32, all.subspan(0, 16)},
        {"t", {4}, GgmlType::kF32, all.subspan(16, 16)}},
       "tensor 't' appears twice"},
      {{},
       {{"t", {4}, GgmlType::kF32, all.subspan(0, 12)}},
       "has 12 bytes of data, its F32 shape [4] needs 16"},
      {{}, {{"t", {}, GgmlType::kF32, all.subspan(0, 0)}}, "has 0 dims"},
      {{},
       {{"t", {16}, GgmlType::kQ8_0, all.subspan(0, 17)}},
       "not a multiple of the Q8_0 block size 32"},
  };
  for (const Case& c : cases) {
    auto file = GgufFile::FromParts(c.metadata, c.tensors, nullptr);
    ASSERT_FALSE(file.ok()) << c.message;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(file.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace tessera::gguf
