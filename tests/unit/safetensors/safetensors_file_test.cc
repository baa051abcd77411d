// One .safetensors file: what the writer writes reads back, and every malformed header is an
// INVALID_ARGUMENT naming the file and (where there is one) the tensor.
#include "common/safetensors/safetensors_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/safetensors/safetensors_writer.h"
#include "tests/unit/safetensors/safetensors_test_util.h"

namespace tessera::safetensors {
namespace {

using ::testing::HasSubstr;
using testing::Image;

std::vector<uint8_t> Floats(std::initializer_list<float> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.begin(), bytes.size());
  return bytes;
}

TEST(SafetensorsFileTest, ReadsWhatTheWriterWrites) {
  SafetensorsWriter writer;
  writer.Add("b.weight", Dtype::kF32, {2, 3}, Floats({1, 2, 3, 4, 5, 6}));
  writer.Add("a.scale", Dtype::kF32, {}, Floats({0.5f}));
  writer.Add("c.codes", Dtype::kU8, {3}, std::vector<uint8_t>{7, 8, 9});
  const std::string path = testing_util::UniqueTempPath("st_roundtrip.safetensors");
  ASSERT_TRUE(writer.WriteToFile(path).ok());

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 3u);
  EXPECT_EQ((*file)->tensors()[0].name, "b.weight");  // data order
  const SafetensorsTensor* b = (*file)->Find("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, Dtype::kF32);
  EXPECT_EQ(b->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(b->num_elements, 6u);
  float values[6];
  ASSERT_EQ(b->data.size(), sizeof(values));
  std::memcpy(values, b->data.data(), sizeof(values));
  EXPECT_EQ(values[5], 6.0f);
  const SafetensorsTensor* scale = (*file)->Find("a.scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_TRUE(scale->shape.empty());
  EXPECT_EQ(scale->num_elements, 1u);
  EXPECT_EQ((*file)->Find("c.codes")->data[2], 9);
  EXPECT_EQ((*file)->Find("missing"), nullptr);
}

TEST(SafetensorsFileTest, AcceptsMetadataAndTheDtypesHfUses) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"s":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]},)"
      R"("h":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]},)"
      R"("i":{"dtype":"I64","shape":[1],"data_offsets":[4,12]},)"
      R"("b":{"dtype":"BOOL","shape":[0],"data_offsets":[12,12]}})";
  const std::string path = testing_util::UniqueTempPath("st_dtypes.safetensors");
  testing::WriteBytes(path, Image(header, std::vector<uint8_t>(12, 1)));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Find("s")->dtype, Dtype::kF8E4M3);
  EXPECT_EQ((*file)->Find("h")->dtype, Dtype::kBF16);
  EXPECT_EQ((*file)->Find("i")->data.size(), 8u);
  EXPECT_EQ((*file)->Find("b")->num_elements, 0u);
}

struct BadCase {
  const char* label;
  std::vector<uint8_t> image;
  const char* message;  // what the error must say
  const char* tensor;   // the tensor it must name ("" when none)
};

std::vector<uint8_t> Four() { return {1, 2, 3, 4}; }

std::vector<BadCase> BadCases() {
  const std::string one = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  return {
      {"short", {1, 2, 3}, "fewer than the 8-byte header length", ""},
      {"length_past_end", Image(one, Four(), one.size() + 100), "runs past the end of the file",
       ""},
      {"length_over_cap", Image(one, Four(), 100'000'001), "exceeds the limit of 100000000", ""},
      {"bad_json", Image(R"({"t":{"dtype":"F32",)", Four()), "not valid JSON", ""},
      {"not_object", Image(R"([1, 2])", Four()), "not a JSON object", ""},
      {"too_deep", Image(R"({"t":{"shape":[[[[1]]]]}})", {}), "nests deeper", ""},
      {"duplicate",
       Image(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             std::vector<uint8_t>(8)),
       "appears twice", "t"},
      {"unknown_dtype", Image(R"({"t":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", {1}),
       "dtype 'F4' is unknown or not supported", "t"},
      {"no_dtype", Image(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", Four()), "has no dtype",
       "t"},
      {"negative_dim", Image(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", Four()),
       "not a size", "t"},
      {"bad_offsets", Image(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", Four()),
       "not a [begin, end] pair", "t"},
      {"reversed_offsets",
       Image(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", Four()),
       "end before they begin", "t"},
      {"size_mismatch", Image(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", Four()),
       "hold 4 bytes, its F32 shape [2] needs 2 x 4", "t"},
      {"past_data_end", Image(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", Four()),
       "runs past the end of the data section (4 bytes)", "t"},
      {"overlap",
       Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})",
             std::vector<uint8_t>(5)),
       "overlaps tensor 'a'", "b"},
      {"gap",
       Image(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
             R"("b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
             std::vector<uint8_t>(3)),
       "leaves a gap after tensor 'a'", "b"},
      {"trailing", Image(one, std::vector<uint8_t>(6)), "2 bytes after the last tensor", ""},
      {"control_in_name",
       Image("{\"a\\u0007b\":{\"dtype\":\"U8\",\"shape\":[1],"
             "\"data_offsets\":[0,1]}}",
             {1}),
       "ASCII control character", "a\\007b"},
      {"empty_name", Image(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", {1}),
       "empty name", ""},
  };
}

TEST(SafetensorsFileTest, EveryMalformedHeaderIsAnErrorNamingTheFileAndTensor) {
  for (const BadCase& c : BadCases()) {
    SCOPED_TRACE(c.label);
    const std::string path = testing_util::UniqueTempPath(std::string("st_bad_") + c.label);
    testing::WriteBytes(path, c.image);
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
    EXPECT_THAT(file.status().message(), HasSubstr(c.message));
    EXPECT_THAT(file.status().message(), HasSubstr(path));
    if (std::string(c.tensor).empty()) continue;
    EXPECT_THAT(file.status().message(), HasSubstr(std::string("tensor '") + c.tensor + "'"));
  }
}

TEST(SafetensorsFileTest, AMissingFileIsNotFound) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open("/nonexistent/model.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr("/nonexistent/model.safetensors"));
}

}  // namespace
}  // namespace tessera::safetensors
