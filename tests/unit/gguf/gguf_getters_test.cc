// Typed metadata getters: values, NOT_FOUND for missing keys, INVALID_ARGUMENT naming the key, the
// expected and the actual type.
#include <limits>

#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/gguf/gguf_test_util.h"

namespace tessera::gguf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Value;

class GgufGettersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GgufWriter w;
    w.AddString("s", "text");
    w.AddUint32("u32", 7);
    w.AddInt32("i32", -9);
    w.AddValue("u64_big", Value<uint64_t>(std::numeric_limits<uint64_t>::max()));
    w.AddValue("u64_ok", Value<uint64_t>(123));
    w.AddValue("i8", Value<int8_t>(-5));
    w.AddFloat32("f32", 0.25f);
    w.AddValue("f64", Value<double>(1e-6));
    w.AddBool("flag", true);
    w.AddStringArray("strs", {"a", "", "ccc"});
    w.AddInt32Array("ints", {1, -2, 3});
    w.AddFloat32Array("floats", {0.5f, -1.5f});
    GgufArray u8s{GgufValueType::kUint8, {Value<uint8_t>(1), Value<uint8_t>(255)}};
    w.AddValue("u8s", Value<GgufArray>(u8s));
    GgufArray big{GgufValueType::kUint64, {Value<uint64_t>(1), Value<uint64_t>(1ull << 63)}};
    w.AddValue("u64s_big", Value<GgufArray>(big));
    GgufArray bools{GgufValueType::kBool, {Value<bool>(true)}};
    w.AddValue("bools", Value<GgufArray>(bools));
    auto file = GgufFile::FromBuffer(w.Serialize());
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
  }

  // Expects INVALID_ARGUMENT with `message` exactly.
  template <typename T>
  void ExpectWrongType(const absl::StatusOr<T>& result, const std::string& message) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(result.status().message(), message);
  }

  std::unique_ptr<GgufFile> file_;
};

TEST_F(GgufGettersTest, ReturnsValues) {
  EXPECT_EQ(*file_->GetString("s"), "text");
  EXPECT_EQ(*file_->GetInt("u32"), 7);
  EXPECT_EQ(*file_->GetInt("i32"), -9);
  EXPECT_EQ(*file_->GetInt("u64_ok"), 123);
  EXPECT_EQ(*file_->GetInt("i8"), -5);
  EXPECT_EQ(*file_->GetFloat("f32"), 0.25);
  EXPECT_EQ(*file_->GetFloat("f64"), 1e-6);
  EXPECT_EQ(*file_->GetFloat("u32"), 7.0);  // integers are accepted as floats
  EXPECT_EQ(*file_->GetBool("flag"), true);
  EXPECT_THAT(*file_->GetStringArray("strs"), ElementsAre("a", "", "ccc"));
  EXPECT_THAT(*file_->GetIntArray("ints"), ElementsAre(1, -2, 3));
  EXPECT_THAT(*file_->GetIntArray("u8s"), ElementsAre(1, 255));
  EXPECT_THAT(*file_->GetFloatArray("floats"), ElementsAre(0.5, -1.5));
  EXPECT_THAT(*file_->GetFloatArray("ints"), ElementsAre(1.0, -2.0, 3.0));
  EXPECT_TRUE(file_->HasKey("flag"));
  EXPECT_FALSE(file_->HasKey("nope"));
}

TEST_F(GgufGettersTest, MissingKeyIsNotFound) {
  auto s = file_->GetString("llama.block_count");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.status().message(), "gguf: metadata key 'llama.block_count' not found");
  EXPECT_EQ(file_->GetInt("x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(file_->GetFloat("x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(file_->GetBool("x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(file_->GetStringArray("x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(file_->GetIntArray("x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(file_->GetFloatArray("x").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(GgufGettersTest, WrongTypeNamesKeyExpectedAndActual) {
  ExpectWrongType(file_->GetString("u32"),
                  "gguf: metadata key 'u32' has type uint32, expected string");
  ExpectWrongType(file_->GetInt("f32"),
                  "gguf: metadata key 'f32' has type float32, expected an integer");
  ExpectWrongType(file_->GetInt("flag"),
                  "gguf: metadata key 'flag' has type bool, expected an integer");
  ExpectWrongType(file_->GetFloat("s"),
                  "gguf: metadata key 's' has type string, expected a number");
  ExpectWrongType(file_->GetBool("u32"), "gguf: metadata key 'u32' has type uint32, expected bool");
  ExpectWrongType(file_->GetStringArray("ints"),
                  "gguf: metadata key 'ints' has type array of int32, expected array of string");
  ExpectWrongType(file_->GetStringArray("s"),
                  "gguf: metadata key 's' has type string, expected array of string");
  ExpectWrongType(file_->GetIntArray("floats"),
                  "gguf: metadata key 'floats' has type array of float32, expected array of "
                  "integers");
  ExpectWrongType(file_->GetIntArray("bools"),
                  "gguf: metadata key 'bools' has type array of bool, expected array of integers");
  ExpectWrongType(file_->GetFloatArray("strs"),
                  "gguf: metadata key 'strs' has type array of string, expected array of numbers");
}

TEST_F(GgufGettersTest, IntegersThatDoNotFitInt64AreRejected) {
  auto big = file_->GetInt("u64_big");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("'u64_big'"));
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("does not fit int64"));
  auto arr = file_->GetIntArray("u64s_big");
  EXPECT_EQ(arr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(arr.status().message()), HasSubstr("element 1"));
  EXPECT_EQ(*file_->GetFloat("u64_big"), 18446744073709551615.0);
}

}  // namespace
}  // namespace tessera::gguf
