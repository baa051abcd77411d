// GgufStreamWriter: the file it streams is byte-identical to GgufWriter's image of the same
// metadata and tensors (default and custom alignment), it reads back through GgufFile, and it
// refuses a wrong data size, a tensor too many, a missing tensor and a bad alignment, leaving no
// file under the final name.
#include "common/gguf/gguf_stream_writer.h"

#include <filesystem>
#include <vector>

#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/gguf/gguf_test_util.h"

namespace tessera::gguf {
namespace {

using testing::F32Bytes;
using testing::ReadFileBytes;
using testing::TempPath;
using testing::Value;

struct Model {
  GgufMetadataList metadata;
  std::vector<GgufTensorSpec> specs;
  std::vector<std::vector<uint8_t>> data;
};

// Three tensors whose sizes (32, 20 and 12 bytes) leave padding after the last two.
Model SmallModel(uint64_t alignment) {
  Model m;
  if (alignment != kGgufDefaultAlignment) {
    m.metadata.emplace_back("general.alignment", Value<uint32_t>(static_cast<uint32_t>(alignment)));
  }
  m.metadata.emplace_back("general.architecture", Value<std::string>("llama"));
  m.metadata.emplace_back("llama.block_count", Value<uint32_t>(2));
  std::vector<float> ramp(32);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i) * 0.5f - 7.0f;
  m.specs = {{"a", {4, 2}, GgmlType::kF32}, {"b", {32}, GgmlType::kQ4_1}, {"c", {3}, GgmlType::kF32}};
  m.data = {F32Bytes({1, 2, 3, 4, 5, 6, 7, 8}), *QuantizeFromF32(GgmlType::kQ4_1, ramp),
            F32Bytes({-1, 0.25f, 9})};
  return m;
}

std::vector<uint8_t> InMemoryImage(const Model& m, uint64_t alignment) {
  GgufWriter writer(3, alignment);
  for (const auto& [key, value] : m.metadata) {
    if (key != "general.alignment") writer.AddValue(key, value);  // the writer adds its own
  }
  for (size_t i = 0; i < m.specs.size(); ++i) {
    writer.AddTensor(m.specs[i].name, m.specs[i].dims, m.specs[i].type, m.data[i]);
  }
  return writer.Serialize();
}

TEST(GgufStreamWriterTest, StreamsTheSameBytesAsTheInMemoryWriter) {
  for (uint64_t alignment : {uint64_t{32}, uint64_t{64}}) {
    const Model m = SmallModel(alignment);
    const std::filesystem::path path = TempPath("stream_" + std::to_string(alignment) + ".gguf");
    auto writer = GgufStreamWriter::Create(path, m.metadata, m.specs);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (size_t i = 0; i < m.data.size(); ++i) {
      ASSERT_EQ((*writer)->next()->name, m.specs[i].name);
      ASSERT_TRUE((*writer)->WriteNext(m.data[i]).ok());
    }
    EXPECT_EQ((*writer)->next(), nullptr);
    ASSERT_TRUE((*writer)->Finish().ok());
    EXPECT_EQ(ReadFileBytes(path), InMemoryImage(m, alignment)) << "alignment " << alignment;
    auto file = GgufFile::Open(path.string());
    ASSERT_TRUE(file.ok()) << file.status();
    const GgufTensorInfo* b = (*file)->FindTensor("b");
    ASSERT_NE(b, nullptr);
    const std::span<const uint8_t> bytes = (*file)->TensorData(*b);
    EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), m.data[1]);
    EXPECT_FALSE(std::filesystem::exists(path.string() + ".partial"));
    std::filesystem::remove(path);
  }
}

TEST(GgufStreamWriterTest, RejectsWrongSizesAndMissingTensorsAndLeavesNoFile) {
  const Model m = SmallModel(32);
  const std::filesystem::path path = TempPath("stream_bad.gguf");
  {
    auto writer = GgufStreamWriter::Create(path, m.metadata, m.specs);
    ASSERT_TRUE(writer.ok());
    const absl::Status short_data = (*writer)->WriteNext({m.data[0].data(), 31});
    EXPECT_EQ(short_data.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(short_data.message(), ::testing::HasSubstr("tensor 'a': 31 bytes given"));
    ASSERT_TRUE((*writer)->WriteNext(m.data[0]).ok());
    const absl::Status missing = (*writer)->Finish();
    EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(missing.message(), ::testing::HasSubstr("tensor 'b'"));
    EXPECT_TRUE(std::filesystem::exists(path.string() + ".partial"));
  }
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".partial"));  // removed unfinished
  EXPECT_FALSE(std::filesystem::exists(path));

  auto writer = GgufStreamWriter::Create(path, m.metadata, {m.specs[0]});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->WriteNext(m.data[0]).ok());
  EXPECT_EQ((*writer)->WriteNext(m.data[0]).code(), absl::StatusCode::kInvalidArgument);
}

TEST(GgufStreamWriterTest, RejectsABadAlignmentAndAnUnwritablePath) {
  GgufMetadataList odd = {{"general.alignment", Value<uint32_t>(48)}};
  EXPECT_EQ(GgufStreamWriter::Create(TempPath("odd.gguf"), odd, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const auto status = GgufStreamWriter::Create("/nonexistent-dir/x.gguf", {}, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("/nonexistent-dir/x.gguf.partial"));
}

}  // namespace
}  // namespace tessera::gguf
