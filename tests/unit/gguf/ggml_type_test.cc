// The ggml type table: wire ids, names and block geometry from ggml-common.h.
#include "common/gguf/ggml_type.h"

#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

TEST(GgmlTypeTest, BlockGeometryMatchesGgml) {
  struct Expected {
    uint32_t id;
    const char* name;
    uint32_t block_size;
    uint32_t type_size;
  };
  const Expected kTable[] = {
      {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},
      {3, "Q4_1", 32, 20},    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},
      {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 36},    {10, "Q2_K", 256, 84},
      {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
      {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},
      {25, "I16", 1, 2},      {26, "I32", 1, 4},      {27, "I64", 1, 8},
      {28, "F64", 1, 8},      {30, "BF16", 1, 2},     {39, "MXFP4", 32, 17},
      {40, "NVFP4", 64, 36},
  };
  for (const Expected& e : kTable) {
    SCOPED_TRACE(e.name);
    const std::optional<GgmlTypeInfo> info = LookupGgmlType(e.id);
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(static_cast<uint32_t>(info->type), e.id);
    EXPECT_STREQ(info->name, e.name);
    EXPECT_EQ(info->block_size, e.block_size);
    EXPECT_EQ(info->type_size, e.type_size);
    EXPECT_EQ(GgmlTypeName(info->type), e.name);
    EXPECT_EQ(GetGgmlTypeInfo(info->type).type_size, e.type_size);
  }
}

TEST(GgmlTypeTest, UnknownIds) {
  for (uint32_t id : {4u, 5u, 16u, 23u, 29u, 31u, 38u, 41u, 1000u}) {
    EXPECT_FALSE(LookupGgmlType(id).has_value()) << id;
  }
  EXPECT_EQ(GgmlTypeName(static_cast<GgmlType>(4)), "unknown(4)");
  EXPECT_DEATH(GetGgmlTypeInfo(static_cast<GgmlType>(4)), "not a valid GgmlType");
}

}  // namespace
}  // namespace tessera::gguf
