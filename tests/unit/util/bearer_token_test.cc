// Bearer credentials (common/util/bearer_token.h): the scheme in any case and with extra spaces
// (RFC 7235), the token compared exactly, no key configured admits everyone.
#include "common/util/bearer_token.h"

#include <gtest/gtest.h>

namespace tessera::util {
namespace {

TEST(BearerTokenTest, TheSchemeIsCaseInsensitiveAndTheTokenExact) {
  EXPECT_TRUE(BearerMatches("Bearer k3y", "k3y"));
  EXPECT_TRUE(BearerMatches("bearer k3y", "k3y"));
  EXPECT_TRUE(BearerMatches("BEARER   k3y", "k3y"));
  EXPECT_FALSE(BearerMatches("Bearer K3Y", "k3y"));
  EXPECT_FALSE(BearerMatches("Bearer k3y ", "k3y"));
  EXPECT_FALSE(BearerMatches("Bearer k3", "k3y"));
  EXPECT_FALSE(BearerMatches("Basic k3y", "k3y"));
  EXPECT_FALSE(BearerMatches("Bearerk3y", "k3y"));
  EXPECT_FALSE(BearerMatches("Bearer", "k3y"));
  EXPECT_FALSE(BearerMatches("", "k3y"));
}

TEST(BearerTokenTest, NoKeyConfiguredAdmitsEveryone) {
  EXPECT_TRUE(BearerMatches("", ""));
  EXPECT_TRUE(BearerMatches("Basic whatever", ""));
}

TEST(BearerTokenTest, ConstantTimeEqualsComparesEveryByte) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "xbc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
}

}  // namespace
}  // namespace tessera::util
