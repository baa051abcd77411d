#include "common/tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>

#include "common/tokenizer/utf8.h"

namespace tessera::tokenizer {
namespace {

TEST(ByteLevelTest, AllBytesRoundTrip) {
  std::set<char32_t> seen;
  for (int byte = 0; byte < 256; ++byte) {
    const char32_t cp = ByteToCodePoint(static_cast<uint8_t>(byte));
    EXPECT_TRUE(seen.insert(cp).second) << "code point reused for byte " << byte;
    ASSERT_TRUE(CodePointToByte(cp).has_value()) << byte;
    EXPECT_EQ(*CodePointToByte(cp), byte);
  }
  std::string all_bytes;
  for (int byte = 0; byte < 256; ++byte) all_bytes.push_back(static_cast<char>(byte));
  const std::string symbols = BytesToByteLevel(all_bytes);
  EXPECT_TRUE(IsValidUtf8(symbols));
  EXPECT_EQ(ByteLevelToBytes(symbols), all_bytes);
}

TEST(ByteLevelTest, KnownPairs) {
  EXPECT_EQ(ByteToCodePoint(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(ByteToCodePoint('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(ByteToCodePoint('\t'), U'\u0109');  // 'ĉ'
  EXPECT_EQ(ByteToCodePoint('A'), U'A');        // printable ASCII stands for itself
  EXPECT_EQ(ByteToCodePoint(0xE9), U'\u00e9');  // printable Latin-1 too
  EXPECT_EQ(ByteToCodePoint(0x00), U'\u0100');
  EXPECT_EQ(ByteToCodePoint(0xAD), U'\u0143');                       // soft hyphen is moved
  EXPECT_EQ(BytesToByteLevel(" hello\n"), "\xC4\xA0hello\xC4\x8A");  // "Ġhello" + "Ċ"
}

TEST(ByteLevelTest, RejectsTextOutsideTheAlphabet) {
  EXPECT_FALSE(CodePointToByte(U' ').has_value());  // space itself is not a symbol
  EXPECT_FALSE(CodePointToByte(U'\u4e2d').has_value());
  EXPECT_FALSE(ByteLevelToBytes("a b").has_value());
  EXPECT_FALSE(ByteLevelToBytes("\xFF").has_value());  // not UTF-8
  EXPECT_EQ(ByteLevelToBytes(""), std::string());
}

}  // namespace
}  // namespace tessera::tokenizer
