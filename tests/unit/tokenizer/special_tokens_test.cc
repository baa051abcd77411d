#include "common/tokenizer/special_tokens.h"

#include <gtest/gtest.h>

namespace tessera::tokenizer {
namespace {

SpecialTokenMatcher MakeMatcher() {
  SpecialTokenMatcher matcher;
  matcher.Add("<|im_start|>", 1, /*is_control=*/true);
  matcher.Add("<|im", 2, /*is_control=*/true);
  matcher.Add("<tool>", 3, /*is_control=*/false);
  matcher.Add("<tool_call>", 4, /*is_control=*/true);
  matcher.Add("ab", 5, /*is_control=*/true);
  matcher.Add("bcd", 6, /*is_control=*/true);
  return matcher;
}

TEST(SpecialTokenMatcherTest, PrefersTheLongestMatchAtAPosition) {
  const SpecialTokenMatcher matcher = MakeMatcher();
  auto match = matcher.FindNext("x<|im_start|>y", 0, true);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->begin, 1u);
  EXPECT_EQ(match->length, 12u);
  EXPECT_EQ(match->id, 1);
  match = matcher.FindNext("<|im_end", 0, true);  // only the shorter token fits
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->id, 2);
  EXPECT_EQ(match->length, 4u);
}

TEST(SpecialTokenMatcherTest, LeftmostWinsOverLonger) {
  // HF semantics: "ab" starts first, so "bcd" (longer, overlapping) does not match.
  auto match = MakeMatcher().FindNext("abcd", 0, true);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->id, 5);
}

TEST(SpecialTokenMatcherTest, ControlTokensOnlyWhenAsked) {
  const SpecialTokenMatcher matcher = MakeMatcher();
  EXPECT_FALSE(matcher.FindNext("<|im_start|>", 0, false).has_value());
  // A user-defined token always matches, and a longer control token does not shadow it.
  auto match = matcher.FindNext("<tool_call>", 0, false);
  EXPECT_FALSE(match.has_value());
  match = matcher.FindNext("<tool_call> <tool>", 0, false);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->id, 3);
  EXPECT_EQ(match->begin, 12u);
  match = matcher.FindNext("<tool_call>", 0, true);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->id, 4);
}

TEST(SpecialTokenMatcherTest, SearchesFromPosition) {
  const SpecialTokenMatcher matcher = MakeMatcher();
  auto match = matcher.FindNext("ab ab", 1, true);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->begin, 3u);
  EXPECT_FALSE(matcher.FindNext("ab", 2, true).has_value());
  EXPECT_FALSE(SpecialTokenMatcher().FindNext("ab", 0, true).has_value());
}

TEST(SpecialTokenMatcherTest, DuplicateTextKeepsFirstId) {
  SpecialTokenMatcher matcher;
  matcher.Add("<s>", 7, true);
  matcher.Add("<s>", 9, true);
  EXPECT_EQ(matcher.size(), 1u);
  EXPECT_EQ(matcher.FindNext("<s>", 0, true)->id, 7);
}

}  // namespace
}  // namespace tessera::tokenizer
