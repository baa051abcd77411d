// Every file in tests/data/gguf_malformed/ (made by tools/corpus/make_gguf_corpus.py) must be
// rejected with INVALID_ARGUMENT and a message naming its defect, both through FromBuffer and
// through the mmap path (Open). The table below must list exactly the files in the directory: a new
// corpus file without an entry, or an entry without a file, fails the test.
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "common/gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/gguf/gguf_test_util.h"

namespace tessera::gguf {
namespace {

using ::testing::HasSubstr;

constexpr char kCorpusDir[] = "tests/data/gguf_malformed";

// file name -> substring the error message must contain.
const std::map<std::string, std::string>& ExpectedErrors() {
  static const auto* kTable = new std::map<std::string, std::string>{
      {"absurd_kv_count.gguf", "metadata kv count 4611686018427387904 is impossible"},
      {"absurd_tensor_count.gguf", "tensor count 1099511627776 is impossible"},
      {"alignment_not_pow2.gguf", "alignment 48 is not a nonzero power of two"},
      {"alignment_wrong_type.gguf", "alignment must be of type uint32 but is uint64"},
      {"alignment_zero.gguf", "alignment 0 is not a nonzero power of two"},
      {"array_len_absurd.gguf", "array length 4294967296 (uint32 elements"},
      {"bad_magic.gguf", "bad magic (the file does not start with \"GGUF\"): not a GGUF file"},
      {"bool_invalid_byte.gguf", "bool byte 2 at offset 40 is neither 0 nor 1"},
      {"data_section_past_end.gguf", "data section would start at offset 64"},
      {"dim_negative.gguf", "dims[0] = 9223372036854775808 exceeds the int64 maximum"},
      {"dim_overflow.gguf", "element count of shape [4294967296, 4294967296] overflows int64"},
      {"dims_not_multiple_of_block.gguf", "dims[0] = 33 is not a multiple of the Q4_0 block size"},
      {"duplicate_key.gguf", "metadata key #1 'a.b': duplicate key"},
      {"duplicate_tensor_name.gguf", "tensor #1 'a': duplicate tensor name"},
      {"empty_file.gguf", "is empty (0 bytes)"},
      {"empty_key.gguf", "metadata key #0: key is empty"},
      {"key_len_past_end.gguf", "key length 1099511627776 runs past end of file"},
      {"nested_array_too_deep.gguf", "arrays nested deeper than 8 levels"},
      {"string_array_len_absurd.gguf", "array length 2305843009213693952 (string elements"},
      {"string_len_past_end.gguf",
       "metadata key #0 'general.name': string value length 99999999 runs past end of file "
       "(offset 56, file size 57)"},
      {"tensor_offset_misaligned.gguf", "data offset 16 is not a multiple of the alignment 32"},
      {"tensor_offset_past_end.gguf", "data [offset 1099511627776, +32 bytes) runs past end"},
      {"tensor_size_overflow.gguf", "byte size of shape [4611686018427387904] of F32 overflows"},
      {"too_many_dims.gguf", "n_dims 5 is out of range [1, 4]"},
      {"truncated_counts.gguf", "header: truncated reading metadata kv count"},
      {"truncated_header.gguf", "header: truncated reading version"},
      {"truncated_in_metadata.gguf", "string value length 5 runs past end of file"},
      {"truncated_in_metadata_value.gguf", "'llama.context_length': truncated reading uint64"},
      {"truncated_in_tensor_infos.gguf", "tensor #0 't': truncated reading dims[3]"},
      {"truncated_tensor_data.gguf", "data [offset 0, +32 bytes) runs past end of file"},
      {"unknown_array_element_type.gguf", "unknown array element type id 99"},
      {"unknown_tensor_type.gguf", "unknown or unsupported ggml type id 4"},
      {"unknown_value_type.gguf", "unknown value type id 13"},
      {"version_0.gguf", "unsupported version 0"},
      {"version_1.gguf", "GGUF version 1 is not supported"},
      {"version_4.gguf", "unsupported version 4"},
      {"version_big_endian.gguf", "looks byte-swapped: big-endian GGUF files are not supported"},
      {"zero_dims.gguf", "n_dims 0 is out of range [1, 4]"},
  };
  return *kTable;
}

std::set<std::string> CorpusFiles() {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpusDir)) {
    if (entry.is_regular_file()) names.insert(entry.path().filename().string());
  }
  return names;
}

TEST(GgufMalformedCorpusTest, TableListsExactlyTheCorpusFiles) {
  ASSERT_TRUE(std::filesystem::is_directory(kCorpusDir))
      << kCorpusDir << " missing; tests must run from the repository root";
  const std::set<std::string> files = CorpusFiles();
  EXPECT_GE(files.size(), 20u);
  for (const std::string& name : files) {
    EXPECT_TRUE(ExpectedErrors().contains(name))
        << name << " has no entry in ExpectedErrors(); add the substring its error must contain";
  }
  for (const auto& [name, substring] : ExpectedErrors()) {
    EXPECT_TRUE(files.contains(name)) << name << " is listed but not in " << kCorpusDir;
  }
}

TEST(GgufMalformedCorpusTest, EveryFileFailsWithItsMessage) {
  for (const std::string& name : CorpusFiles()) {
    SCOPED_TRACE(name);
    const auto expected = ExpectedErrors().find(name);
    if (expected == ExpectedErrors().end()) continue;  // reported by the test above
    const std::filesystem::path path = std::filesystem::path(kCorpusDir) / name;

    auto from_buffer = GgufFile::FromBuffer(testing::ReadFileBytes(path));
    ASSERT_FALSE(from_buffer.ok()) << "parsed successfully";
    EXPECT_EQ(from_buffer.status().code(), absl::StatusCode::kInvalidArgument);
    if (name != "empty_file.gguf") {  // FromBuffer has no path to name
      EXPECT_THAT(std::string(from_buffer.status().message()), HasSubstr(expected->second));
    }

    auto opened = GgufFile::Open(path.string());
    ASSERT_FALSE(opened.ok()) << "opened successfully";
    EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(opened.status().message()), HasSubstr(expected->second));
    EXPECT_THAT(std::string(opened.status().message()), HasSubstr(name));
  }
}

TEST(GgufMalformedCorpusTest, EmptyBufferIsAnErrorNotACrash) {
  auto file = GgufFile::FromBuffer({});
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file.status().message(), "gguf: header: file is empty (0 bytes)");
}

}  // namespace
}  // namespace tessera::gguf
