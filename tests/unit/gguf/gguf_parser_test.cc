// GgufFile parsing: well-formed files (hand-built bytes, Python-written files, mmap'd files), the
// validation rules one by one, and truncation of a valid file at every byte offset.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/gguf/gguf_test_util.h"

namespace tessera::gguf {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAre;
using testing::GgufBytes;
using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::StatusOr<std::unique_ptr<GgufFile>> Parse(const GgufBytes& b) {
  return GgufFile::FromBuffer(b.bytes());
}

// Expects INVALID_ARGUMENT with a message containing `substring`.
void ExpectInvalid(const GgufBytes& b, const std::string& substring) {
  auto file = Parse(b);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(substring));
  EXPECT_THAT(std::string(file.status().message()), StartsWith("gguf: "));
}

TEST(GgufParserTest, ParsesEveryValueType) {
  GgufBytes b;
  b.Header(3, 0, 14);
  b.Key("u8", GgufValueType::kUint8).U8(250);
  b.Key("i8", GgufValueType::kInt8).U8(0x80);  // -128
  b.Key("u16", GgufValueType::kUint16).U16(65535);
  b.Key("i16", GgufValueType::kInt16).U16(0x8000);  // -32768
  b.Key("u32", GgufValueType::kUint32).U32(4000000000u);
  b.Key("i32", GgufValueType::kInt32).I32(-7);
  b.Key("f32", GgufValueType::kFloat32).F32(1.5f);
  b.Key("bool", GgufValueType::kBool).U8(1);
  b.Key("str", GgufValueType::kString).Str("héllo");
  b.Key("u64", GgufValueType::kUint64).U64(UINT64_MAX);
  b.Key("i64", GgufValueType::kInt64).U64(static_cast<uint64_t>(INT64_MIN));
  b.Key("f64", GgufValueType::kFloat64).U64(0x3FD0000000000000);  // 0.25
  b.Key("arr", GgufValueType::kArray).U32(8).U64(2).Str("x").Str("");
  // [[1, 2], []] : array of arrays of int32.
  b.Key("nested", GgufValueType::kArray).U32(9).U64(2);
  b.U32(5).U64(2).I32(1).I32(2);
  b.U32(5).U64(0);
  auto file = Parse(b);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  ASSERT_EQ(f.metadata().size(), 14u);
  EXPECT_EQ(*f.FindMetadata("u8")->GetIf<uint8_t>(), 250);
  EXPECT_EQ(*f.FindMetadata("i8")->GetIf<int8_t>(), -128);
  EXPECT_EQ(*f.FindMetadata("u16")->GetIf<uint16_t>(), 65535);
  EXPECT_EQ(*f.FindMetadata("i16")->GetIf<int16_t>(), -32768);
  EXPECT_EQ(*f.FindMetadata("u32")->GetIf<uint32_t>(), 4000000000u);
  EXPECT_EQ(*f.FindMetadata("i32")->GetIf<int32_t>(), -7);
  EXPECT_EQ(*f.FindMetadata("f32")->GetIf<float>(), 1.5f);
  EXPECT_EQ(*f.FindMetadata("bool")->GetIf<bool>(), true);
  EXPECT_EQ(*f.FindMetadata("str")->GetIf<std::string>(), "héllo");
  EXPECT_EQ(*f.FindMetadata("u64")->GetIf<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(*f.FindMetadata("i64")->GetIf<int64_t>(), INT64_MIN);
  EXPECT_EQ(*f.FindMetadata("f64")->GetIf<double>(), 0.25);
  const GgufArray* arr = f.FindMetadata("arr")->GetIf<GgufArray>();
  ASSERT_NE(arr, nullptr);
  EXPECT_EQ(arr->element_type, GgufValueType::kString);
  ASSERT_EQ(arr->elements.size(), 2u);
  EXPECT_EQ(*arr->elements[1].GetIf<std::string>(), "");
  EXPECT_EQ(f.FindMetadata("nested")->DebugString(), "[[1, 2], []]");
  // Metadata keeps file order.
  EXPECT_EQ(f.metadata().front().key, "u8");
  EXPECT_EQ(f.metadata().back().key, "nested");
  EXPECT_EQ(f.FindMetadata("missing"), nullptr);
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufParserTest, AcceptsVersion2) {
  GgufBytes b;
  b.Header(2, 0, 1).Key("general.architecture", GgufValueType::kString).Str("llama");
  auto file = Parse(b);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), 2u);
}

TEST(GgufParserTest, ReadsFilesWrittenByThePythonCorpusGenerator) {
  for (int version : {2, 3}) {
    const std::string path = "tests/data/gguf_valid/tiny_v" + std::to_string(version) + ".gguf";
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    const GgufFile& f = **file;
    EXPECT_EQ(f.version(), static_cast<uint32_t>(version));
    EXPECT_EQ(f.metadata().size(), 16u);
    EXPECT_EQ(*f.GetString("general.name"), "tiny \xC3\xA9");
    EXPECT_EQ(*f.FindMetadata("tiny.u64")->GetIf<uint64_t>(), (uint64_t{1} << 63) + 5);
    EXPECT_EQ(*f.GetInt("tiny.i64"), -(int64_t{1} << 62));
    EXPECT_EQ(f.FindMetadata("tiny.nested")->DebugString(), "[[1, 2], [], [3]]");
    EXPECT_EQ(f.data_offset(), 640u);  // what the Python gguf reader reports too
    ASSERT_EQ(f.tensors().size(), 2u);
    const GgufTensorInfo& t = f.tensors()[0];
    EXPECT_EQ(t.name, "f32");
    EXPECT_THAT(t.dims, ElementsAre(4, 2));
    EXPECT_EQ(t.num_elements, 8u);
    EXPECT_EQ(t.num_bytes, 32u);
    auto values = DequantizeToF32(t.type, f.TensorData(t), t.num_elements);
    ASSERT_TRUE(values.ok());
    EXPECT_THAT(*values, ElementsAre(1.0f, -2.0f, 0.5f, 3.25f, 0.0f, -0.125f, 8.0f, 100.0f));
    const GgufTensorInfo* q8 = f.FindTensor("q8");
    ASSERT_NE(q8, nullptr);
    EXPECT_EQ(q8->type, GgmlType::kQ8_0);
    EXPECT_EQ(q8->offset, 32u);
    EXPECT_EQ(q8->num_bytes, 34u);
  }
}

TEST(GgufParserTest, CustomAlignmentMovesTheDataSection) {
  GgufBytes b;
  b.Header(3, 1, 1).Key("general.alignment", GgufValueType::kUint32).U32(64);
  b.TensorInfo("t", {8}, 0, 0).PadTo(64);
  const size_t data_start = b.size();
  for (int i = 0; i < 8; ++i) b.F32(static_cast<float>(i));
  auto file = Parse(b);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->alignment(), 64u);
  EXPECT_EQ((*file)->data_offset(), data_start);
  EXPECT_EQ((*file)->data_offset() % 64, 0u);
}

TEST(GgufParserTest, OffsetMustBeAMultipleOfTheCustomAlignment) {
  GgufBytes b;
  b.Header(3, 1, 1).Key("general.alignment", GgufValueType::kUint32).U32(64);
  b.TensorInfo("t", {8}, 0, 32).PadTo(64);
  for (int i = 0; i < 32; ++i) b.F32(0);
  ExpectInvalid(b, "data offset 32 is not a multiple of the alignment 64");
}

TEST(GgufParserTest, NoTensorsNeedsNoPadding) {
  GgufBytes b;
  b.Header(3, 0, 1).Key("k", GgufValueType::kUint8).U8(1);
  auto file = Parse(b);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->data_offset(), b.size());  // clamped to the end: nothing follows
}

TEST(GgufParserTest, ZeroElementTensorIsAllowed) {
  GgufBytes b;
  b.Header(3, 1, 0).TensorInfo("empty", {0, 1u << 31}, 0, 0).PadTo(32);
  auto file = Parse(b);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors()[0].num_elements, 0u);
  EXPECT_EQ((*file)->tensors()[0].num_bytes, 0u);
  EXPECT_TRUE((*file)->TensorData((*file)->tensors()[0]).empty());
}

TEST(GgufParserTest, OverlappingTensorsAndTrailingBytesAreAllowed) {
  // ggml does not require tensors to be disjoint or the file to end after the data.
  GgufBytes b;
  b.Header(3, 2, 0).TensorInfo("a", {8}, 0, 0).TensorInfo("b", {4}, 0, 0).PadTo(32);
  for (int i = 0; i < 8; ++i) b.F32(static_cast<float>(i));
  b.U32(0xDEADBEEF);
  auto file = Parse(b);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.TensorData(*f.FindTensor("a")).data(), f.TensorData(*f.FindTensor("b")).data());
}

TEST(GgufParserTest, ArraysNestUpToTheDepthLimit) {
  auto nested = [](int depth) {
    GgufBytes b;
    b.Header(3, 0, 1).Key("k", GgufValueType::kArray);
    for (int level = 1; level < depth; ++level) b.U32(9).U64(1);
    b.U32(0).U64(1).U8(7);
    return b;
  };
  auto ok = Parse(nested(kGgufMaxArrayDepth));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->FindMetadata("k")->DebugString(), "[[[[[[[[7]]]]]]]]");
  ExpectInvalid(nested(kGgufMaxArrayDepth + 1), "nested deeper than 8 levels");
}

TEST(GgufParserTest, ErrorMessagesNameTheEntryAndTheOffsets) {
  GgufBytes b;
  b.Header(3, 0, 2).Key("a", GgufValueType::kUint8).U8(1);
  b.Key("llama.block_count", GgufValueType::kString).U64(99999999).Str("xyz");
  // Header 24 + key "a" entry 14 + key "llama.block_count" (8 + 17) + type 4 + length 8 = 75.
  auto file = Parse(b);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(),
            "gguf: metadata key #1 'llama.block_count': string value length 99999999 runs past "
            "end of file (offset 75, file size 86)");
}

TEST(GgufParserTest, HugeCountsFailBeforeAllocating) {
  // A 4-billion element u32 array, and a 2^61 string array, in files of under 100 bytes.
  GgufBytes a;
  a.Header(3, 0, 1).Key("k", GgufValueType::kArray).U32(4).U64(1ull << 32).U32(1);
  ExpectInvalid(a, "array length 4294967296 (uint32 elements, at least 4 bytes each)");
  GgufBytes s;
  s.Header(3, 0, 1).Key("k", GgufValueType::kArray).U32(8).U64(1ull << 61);
  ExpectInvalid(s, "array length 2305843009213693952");
  GgufBytes nested;
  nested.Header(3, 0, 1).Key("k", GgufValueType::kArray).U32(9).U64(1000);
  ExpectInvalid(nested, "array length 1000 (array elements, at least 12 bytes each)");
  GgufBytes kv;
  kv.Header(3, 0, 1000);
  ExpectInvalid(kv, "metadata kv count 1000 is impossible");
}

TEST(GgufParserTest, RejectsEmptyKeyAndDuplicates) {
  GgufBytes empty;
  empty.Header(3, 0, 1).Key("", GgufValueType::kUint8).U8(0);
  ExpectInvalid(empty, "key is empty");
  GgufBytes dup;
  dup.Header(3, 0, 3).Key("a", GgufValueType::kUint8).U8(0);
  dup.Key("b", GgufValueType::kUint8).U8(0).Key("a", GgufValueType::kUint32).U32(0);
  ExpectInvalid(dup, "metadata key #2 'a': duplicate key (first defined by metadata key #0)");
  GgufBytes tensors;
  tensors.Header(3, 2, 0).TensorInfo("w", {8}, 0, 0).TensorInfo("w", {8}, 0, 32).PadTo(32);
  ExpectInvalid(tensors, "tensor #1 'w': duplicate tensor name (first used by tensor #0)");
}

TEST(GgufParserTest, BoolMustBeZeroOrOne) {
  for (uint8_t byte : {0, 1}) {
    GgufBytes b;
    b.Header(3, 0, 1).Key("b", GgufValueType::kBool).U8(byte);
    ASSERT_TRUE(Parse(b).ok());
  }
  GgufBytes bad;
  bad.Header(3, 0, 1).Key("b", GgufValueType::kArray).U32(7).U64(2).U8(1).U8(255);
  // Header (24) + key "b" (8 + 1) + type (4) + element type (4) + count (8) + first bool (1).
  ExpectInvalid(bad, "bool byte 255 at offset 50 is neither 0 nor 1");
}

TEST(GgufParserTest, TensorShapeAndTypeRules) {
  auto one = [](const std::vector<uint64_t>& dims, uint32_t type) {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("t", dims, type, 0).PadTo(32);
    return b;
  };
  ExpectInvalid(one({}, 0), "n_dims 0 is out of range [1, 4]");
  ExpectInvalid(one({1, 1, 1, 1, 1}, 0), "n_dims 5 is out of range [1, 4]");
  ExpectInvalid(one({8}, 5), "unknown or unsupported ggml type id 5");
  ExpectInvalid(one({8}, 16), "unknown or unsupported ggml type id 16");  // IQ2_XXS
  ExpectInvalid(one({48}, 2), "dims[0] = 48 is not a multiple of the Q4_0 block size 32");
  ExpectInvalid(one({1ull << 63}, 0), "dims[0] = 9223372036854775808 exceeds the int64 maximum");
  ExpectInvalid(one({1ull << 32, 1ull << 31}, 0),
                "element count of shape [4294967296, "
                "2147483648] overflows int64");
  ExpectInvalid(one({1ull << 62}, 28),
                "byte size of shape [4611686018427387904] of F64 "
                "overflows uint64");
  // Right shape, but the data is not in the file.
  ExpectInvalid(one({256, 2}, 12), "tensor #0 't': data [offset 0, +288 bytes) runs past end");
}

TEST(GgufParserTest, AlignmentRules) {
  auto with = [](GgufValueType type, uint64_t value) {
    GgufBytes b;
    b.Header(3, 0, 1).Key("general.alignment", type);
    type == GgufValueType::kUint32 ? b.U32(static_cast<uint32_t>(value)) : b.U64(value);
    return b;
  };
  ExpectInvalid(with(GgufValueType::kUint32, 0), "alignment 0 is not a nonzero power of two");
  ExpectInvalid(with(GgufValueType::kUint32, 96), "alignment 96 is not a nonzero power of two");
  ExpectInvalid(with(GgufValueType::kUint64, 32), "alignment must be of type uint32 but is uint64");
  EXPECT_TRUE(Parse(with(GgufValueType::kUint32, 1)).ok());
  EXPECT_TRUE(Parse(with(GgufValueType::kUint32, 1u << 31)).ok());
}

// Every prefix of a valid file either parses (once all tensor bytes are present; the trailing
// padding after the last tensor is optional) or fails cleanly with INVALID_ARGUMENT.
void ExpectEveryTruncationFailsCleanly(const std::vector<uint8_t>& full) {
  auto whole = GgufFile::FromBuffer(full);
  ASSERT_TRUE(whole.ok()) << whole.status();
  uint64_t required = (*whole)->data_offset();
  for (const GgufTensorInfo& t : (*whole)->tensors()) {
    required = std::max(required, (*whole)->data_offset() + t.offset + t.num_bytes);
  }
  if ((*whole)->tensors().empty()) required = full.size();
  for (size_t length = 0; length < full.size(); ++length) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + length);
    auto file = GgufFile::FromBuffer(std::move(prefix));
    if (length >= required) {
      EXPECT_TRUE(file.ok()) << "length " << length << ": " << file.status();
      continue;
    }
    ASSERT_FALSE(file.ok()) << "length " << length << " of " << full.size() << " parsed";
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(file.status().message()),
                AnyOf(HasSubstr("truncated"), HasSubstr("past end"), HasSubstr("impossible"),
                      HasSubstr("empty")))
        << "length " << length;
  }
}

TEST(GgufParserTest, TruncatingAtEveryOffsetFailsCleanly) {
  ExpectEveryTruncationFailsCleanly(testing::TinyModel(3));
  ExpectEveryTruncationFailsCleanly(testing::TinyModelWriter(2, 64).Serialize());
  ExpectEveryTruncationFailsCleanly(testing::ReadFileBytes("tests/data/gguf_valid/tiny_v3.gguf"));
}

TEST(GgufParserTest, OpenMapsTheFileAndReportsPathErrors) {
  const std::filesystem::path path = testing::TempPath("open_test.gguf");
  ASSERT_TRUE(testing::TinyModelWriter().WriteToFile(path.string()).ok());
  auto file = GgufFile::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(*(*file)->GetString("general.architecture"), "llama");
  const GgufTensorInfo* q41 = (*file)->FindTensor("q41");
  ASSERT_NE(q41, nullptr);
  EXPECT_EQ((*file)->TensorData(*q41).size(), 40u);

  auto missing = GgufFile::Open((path.string() + ".missing"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(".missing"));

  auto dir = GgufFile::Open(::testing::TempDir());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);

  { std::ofstream truncate(path, std::ios::trunc); }
  auto empty = GgufFile::Open(path.string());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("empty"));

  {
    std::ofstream bad(path, std::ios::binary);
    bad << "GGUF\x01";
  }
  auto broken = GgufFile::Open(path.string());
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(broken.status().message()),
              AnyOf(HasSubstr("truncated"), HasSubstr(path.string())));
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr(path.string()));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera::gguf
