#include "common/tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace tessera::tokenizer {
namespace {

TEST(Utf8Test, DecodesValidSequences) {
  const std::string text = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";  // a é 中 😀
  Utf8Step step = DecodeUtf8At(text, 0);
  EXPECT_EQ(step.kind, Utf8Step::Kind::kValid);
  EXPECT_EQ(step.code_point, U'a');
  step = DecodeUtf8At(text, 1);
  EXPECT_EQ(step.length, 2u);
  EXPECT_EQ(step.code_point, U'\u00e9');
  step = DecodeUtf8At(text, 3);
  EXPECT_EQ(step.length, 3u);
  EXPECT_EQ(step.code_point, U'\u4e2d');
  step = DecodeUtf8At(text, 6);
  EXPECT_EQ(step.length, 4u);
  EXPECT_EQ(step.code_point, U'\U0001F600');
  EXPECT_TRUE(IsValidUtf8(text));
}

TEST(Utf8Test, RejectsOverlongsSurrogatesAndOutOfRange) {
  for (const std::string bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                "\xF5\x80\x80\x80", "\x80", "\xFF"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  }
}

TEST(Utf8Test, DistinguishesIncompleteFromInvalid) {
  EXPECT_EQ(DecodeUtf8At("\xF0\x9F\x98", 0).kind, Utf8Step::Kind::kIncomplete);
  EXPECT_EQ(DecodeUtf8At("\xF0\x9F\x98", 0).length, 3u);
  EXPECT_EQ(DecodeUtf8At("\xF0\x9F"
                         "a",
                         0)
                .kind,
            Utf8Step::Kind::kInvalid);
  EXPECT_EQ(DecodeUtf8At("\xF0\x9F"
                         "a",
                         0)
                .length,
            2u);  // maximal subpart
}

TEST(Utf8Test, CompletePrefixHoldsBackOnlyATruncatedTail) {
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE4\xB8"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xFF"), 3u);  // invalid: more input cannot fix it
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
}

TEST(Utf8Test, SanitizeReplacesEachMaximalSubpart) {
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F"
                         "a"),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(SanitizeUtf8("x\xE4\xB8"), "x\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
}

TEST(Utf8Test, AppendEncodesAllLengths) {
  std::string out;
  for (char32_t cp : {U'a', U'\u00e9', U'\u4e2d', U'\U0001F600'}) AppendUtf8(cp, &out);
  EXPECT_EQ(out, "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace tessera::tokenizer
