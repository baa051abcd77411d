// GgufValue: type ids, numeric views, and DebugString rendering.
#include "common/gguf/gguf_value.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"
#include "tests/unit/gguf/gguf_test_util.h"

namespace tessera::gguf {
namespace {

using testing::Value;

TEST(GgufValueTest, TypeIdEqualsTheWireId) {
  EXPECT_EQ(Value<uint8_t>(1).type(), GgufValueType::kUint8);
  EXPECT_EQ(Value<bool>(true).type(), GgufValueType::kBool);
  EXPECT_EQ(Value<std::string>("x").type(), GgufValueType::kString);
  EXPECT_EQ(Value<GgufArray>({}).type(), GgufValueType::kArray);
  EXPECT_EQ(Value<uint64_t>(1).type(), GgufValueType::kUint64);
  EXPECT_EQ(Value<double>(1).type(), GgufValueType::kFloat64);
}

TEST(GgufValueTest, TypeNames) {
  EXPECT_EQ(GgufValueTypeName(GgufValueType::kUint32), "uint32");
  EXPECT_EQ(GgufValueTypeName(GgufValueType::kFloat32), "float32");
  EXPECT_EQ(GgufValueTypeName(GgufValueType::kArray), "array");
  EXPECT_EQ(GgufValueTypeName(GgufValueType::kFloat64), "float64");
  EXPECT_EQ(GgufValueTypeName(static_cast<GgufValueType>(13)), "unknown(13)");
}

TEST(GgufValueTest, NumericViews) {
  EXPECT_TRUE(Value<int8_t>(-3).IsInteger());
  EXPECT_FALSE(Value<bool>(true).IsInteger());
  EXPECT_FALSE(Value<float>(1).IsInteger());
  EXPECT_TRUE(Value<float>(1).IsFloat());
  EXPECT_TRUE(Value<double>(1).IsFloat());
  EXPECT_FALSE(Value<std::string>("1").IsFloat());
  EXPECT_EQ(Value<int8_t>(-3).AsInt64(), -3);
  EXPECT_EQ(Value<uint32_t>(4000000000u).AsInt64(), 4000000000);
  EXPECT_EQ(Value<uint64_t>(std::numeric_limits<int64_t>::max()).AsInt64(),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Value<int64_t>(std::numeric_limits<int64_t>::min()).AsInt64(),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Value<float>(0.5f).AsDouble(), 0.5);
  EXPECT_EQ(Value<uint16_t>(7).AsDouble(), 7.0);
}

TEST(GgufValueDeathTest, PreconditionsAbort) {
  EXPECT_DEATH(Value<std::string>("1").AsInt64(), "non-integer");
  EXPECT_DEATH(Value<uint64_t>(std::numeric_limits<uint64_t>::max()).AsInt64(), "does not fit");
  EXPECT_DEATH(Value<bool>(true).AsDouble(), "non-numeric");
}

TEST(GgufValueTest, DebugString) {
  EXPECT_EQ(Value<uint8_t>(65).DebugString(), "65");  // a number, not 'A'
  EXPECT_EQ(Value<int8_t>(-1).DebugString(), "-1");
  EXPECT_EQ(Value<bool>(false).DebugString(), "false");
  EXPECT_EQ(Value<float>(0.5f).DebugString(), "0.5");
  EXPECT_EQ(Value<std::string>("a\"b\n").DebugString(), "\"a\\\"b\\n\"");
  const std::string long_string(500, 'x');
  EXPECT_EQ(Value<std::string>(long_string).DebugString(),
            "\"" + std::string(96, 'x') + "\"... (500 bytes)");

  GgufArray ints{GgufValueType::kInt32, {}};
  for (int i = 0; i < 10; ++i) ints.elements.push_back(Value<int32_t>(i));
  EXPECT_EQ(Value<GgufArray>(ints).DebugString(), "[0, 1, 2, 3, 4, 5, 6, 7, ... (10 items)]");
  EXPECT_EQ(Value<GgufArray>(ints).DebugString(2), "[0, 1, ... (10 items)]");
  EXPECT_EQ(Value<GgufArray>(ints).DebugString(0), "[... (10 items)]");
  EXPECT_EQ(Value<GgufArray>(GgufArray{GgufValueType::kString, {}}).DebugString(), "[]");
  GgufArray nested{GgufValueType::kArray, {Value<GgufArray>(ints), Value<GgufArray>({})}};
  EXPECT_EQ(Value<GgufArray>(nested).DebugString(3), "[[0, 1, 2, ... (10 items)], []]");
}

}  // namespace
}  // namespace tessera::gguf
