// GgufWriter round trips: every value type, nested arrays, v2/v3, default and custom alignment,
// tensors of several types; and the exact bytes of a minimal file.
#include "common/gguf/gguf_writer.h"

#include <filesystem>
#include <random>

#include "common/gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/gguf/gguf_test_util.h"

namespace tessera::gguf {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::Value;

GgufArray Array(GgufValueType type, std::vector<GgufValue> elements) {
  return GgufArray{type, std::move(elements)};
}

TEST(GgufWriterTest, MinimalFileBytes) {
  GgufWriter w;
  w.AddUint32("a", 5);
  const std::vector<uint8_t> bytes = w.Serialize();
  const std::vector<uint8_t> expected = {
      'G', 'G', 'U', 'F', 3, 0, 0, 0,       // magic, version 3
      0,   0,   0,   0,   0, 0, 0, 0,       // tensor count
      1,   0,   0,   0,   0, 0, 0, 0,       // kv count
      1,   0,   0,   0,   0, 0, 0, 0, 'a',  // key
      4,   0,   0,   0,                     // uint32
      5,   0,   0,   0,                     // value
      0,   0,   0,   0,   0, 0, 0, 0, 0,   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // pad to 64
  };
  EXPECT_THAT(bytes, ElementsAreArray(expected));
}

TEST(GgufWriterTest, RoundTripsEveryValueType) {
  GgufWriter w(/*version=*/2);
  w.AddValue("u8", Value<uint8_t>(255));
  w.AddValue("i8", Value<int8_t>(-128));
  w.AddValue("u16", Value<uint16_t>(65535));
  w.AddValue("i16", Value<int16_t>(-32768));
  w.AddUint32("u32", 4294967295u);
  w.AddInt32("i32", -2147483647 - 1);
  w.AddFloat32("f32", -0.0f);
  w.AddBool("bool_t", true);
  w.AddBool("bool_f", false);
  w.AddString("str", std::string("with\0nul", 8));
  w.AddValue("u64", Value<uint64_t>(~0ull));
  w.AddValue("i64", Value<int64_t>(-1));
  w.AddValue("f64", Value<double>(3.141592653589793));
  w.AddStringArray("strs", {"", "x"});
  w.AddInt32Array("ints", {});
  w.AddFloat32Array("floats", {1.0f, 2.5f});
  // [[[1]], [], [[2, 3], []]] : three levels of uint64 arrays.
  GgufArray inner1 = Array(GgufValueType::kUint64, {Value<uint64_t>(1)});
  GgufArray inner2 = Array(GgufValueType::kUint64, {Value<uint64_t>(2), Value<uint64_t>(3)});
  GgufArray inner3 = Array(GgufValueType::kUint64, {});
  GgufArray mid1 = Array(GgufValueType::kArray, {Value<GgufArray>(inner1)});
  GgufArray mid2 = Array(GgufValueType::kArray, {});
  GgufArray mid3 =
      Array(GgufValueType::kArray, {Value<GgufArray>(inner2), Value<GgufArray>(inner3)});
  w.AddValue("nested", Value<GgufArray>(Array(GgufValueType::kArray,
                                              {Value<GgufArray>(mid1), Value<GgufArray>(mid2),
                                               Value<GgufArray>(mid3)})));
  GgufArray bools = Array(GgufValueType::kBool, {Value<bool>(true), Value<bool>(false)});
  w.AddValue("bools", Value<GgufArray>(bools));

  auto file = GgufFile::FromBuffer(w.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 2u);
  ASSERT_EQ(f.metadata().size(), 18u);
  EXPECT_EQ(*f.FindMetadata("u8")->GetIf<uint8_t>(), 255);
  EXPECT_EQ(*f.FindMetadata("i8")->GetIf<int8_t>(), -128);
  EXPECT_EQ(*f.FindMetadata("u16")->GetIf<uint16_t>(), 65535);
  EXPECT_EQ(*f.FindMetadata("i16")->GetIf<int16_t>(), -32768);
  EXPECT_EQ(*f.FindMetadata("u32")->GetIf<uint32_t>(), 4294967295u);
  EXPECT_EQ(*f.FindMetadata("i32")->GetIf<int32_t>(), -2147483647 - 1);
  EXPECT_TRUE(std::signbit(*f.FindMetadata("f32")->GetIf<float>()));
  EXPECT_EQ(*f.GetBool("bool_t"), true);
  EXPECT_EQ(*f.GetBool("bool_f"), false);
  EXPECT_EQ(*f.GetString("str"), std::string("with\0nul", 8));
  EXPECT_EQ(*f.FindMetadata("u64")->GetIf<uint64_t>(), ~0ull);
  EXPECT_EQ(*f.GetInt("i64"), -1);
  EXPECT_EQ(*f.GetFloat("f64"), 3.141592653589793);
  EXPECT_THAT(*f.GetStringArray("strs"), ElementsAre("", "x"));
  EXPECT_TRUE(f.GetIntArray("ints")->empty());
  EXPECT_EQ(f.FindMetadata("ints")->GetIf<GgufArray>()->element_type, GgufValueType::kInt32);
  EXPECT_THAT(*f.GetFloatArray("floats"), ElementsAre(1.0, 2.5));
  EXPECT_EQ(f.FindMetadata("nested")->DebugString(), "[[[1]], [], [[2, 3], []]]");
  EXPECT_EQ(f.FindMetadata("bools")->DebugString(), "[true, false]");
  // Insertion order is file order.
  EXPECT_EQ(f.metadata()[0].key, "u8");
  EXPECT_EQ(f.metadata()[17].key, "bools");
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

void ExpectTensorsRoundTrip(uint64_t alignment) {
  SCOPED_TRACE(alignment);
  struct Spec {
    std::string name;
    std::vector<uint64_t> dims;
    GgmlType type;
  };
  const std::vector<Spec> specs = {
      {"f32", {3}, GgmlType::kF32},
      {"f16", {5, 3}, GgmlType::kF16},
      {"bf16", {7}, GgmlType::kBF16},
      {"q8_0", {64, 2}, GgmlType::kQ8_0},
      {"q4_0", {32}, GgmlType::kQ4_0},
      {"q4_1", {32, 3, 1}, GgmlType::kQ4_1},
      {"q5_0", {32, 1, 1, 2}, GgmlType::kQ5_0},
      {"q5_1", {32}, GgmlType::kQ5_1},
      {"q4_k", {256, 2}, GgmlType::kQ4_K},
      {"q6_k", {256}, GgmlType::kQ6_K},
      {"i32", {4}, GgmlType::kI32},
      {"empty", {0}, GgmlType::kF32},
  };
  GgufWriter w(3, alignment);
  w.AddString("general.architecture", "test");
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < specs.size(); ++i) {
    const GgmlTypeInfo& info = GetGgmlTypeInfo(specs[i].type);
    uint64_t n = 1;
    for (uint64_t d : specs[i].dims) n *= d;
    data.push_back(RandomBytes(n / info.block_size * info.type_size, static_cast<uint32_t>(i)));
    w.AddTensor(specs[i].name, specs[i].dims, specs[i].type, data.back());
  }
  auto file = GgufFile::FromBuffer(w.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  EXPECT_EQ(f.HasKey("general.alignment"), alignment != 32);
  ASSERT_EQ(f.tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_EQ(t.dims, specs[i].dims);
    EXPECT_EQ(t.type, specs[i].type);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(t.num_bytes, data[i].size());
    const std::span<const uint8_t> bytes = f.TensorData(t);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), data[i].begin(), data[i].end()));
  }
}

TEST(GgufWriterTest, RoundTripsTensorsWithDefaultAlignment) { ExpectTensorsRoundTrip(32); }
TEST(GgufWriterTest, RoundTripsTensorsWithCustomAlignment) { ExpectTensorsRoundTrip(64); }
TEST(GgufWriterTest, RoundTripsTensorsWithSmallAlignment) { ExpectTensorsRoundTrip(8); }

TEST(GgufWriterTest, WritesFilesTheReaderMaps) {
  const std::filesystem::path path = testing::TempPath("writer_test.gguf");
  ASSERT_TRUE(testing::TinyModelWriter(3, 128).WriteToFile(path.string()).ok());
  auto file = GgufFile::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->alignment(), 128u);
  EXPECT_EQ((*file)->data_offset() % 128, 0u);
  EXPECT_EQ((*file)->tensors().size(), 3u);
  EXPECT_EQ((*file)->file_size() % 128, 0u);  // every tensor, the last too, is padded
  std::filesystem::remove(path);

  auto bad = testing::TinyModelWriter().WriteToFile("/nonexistent-dir/x.gguf");
  EXPECT_EQ(bad.code(), absl::StatusCode::kNotFound);
}

TEST(GgufWriterDeathTest, RejectsProgrammingErrors) {
  GgufWriter w;
  const std::vector<uint8_t> three(3);
  EXPECT_DEATH(w.AddTensor("t", {1}, GgmlType::kF32, three), "data size");
  EXPECT_DEATH(w.AddTensor("t", {16}, GgmlType::kQ4_0, three), "block size");
  EXPECT_DEATH(GgufWriter(3, 48), "power of two");
}

}  // namespace
}  // namespace tessera::gguf
