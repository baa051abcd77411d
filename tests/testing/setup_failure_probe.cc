// A deliberately broken test binary for setup_failure_fails_test (tests/testing/CMakeLists.txt):
// its suite's SetUpTestSuite fails. Linked with tests/testing/gtest_main.cc, the run must exit
// non-zero without printing "[  SKIPPED ]" for the suite's tests.
#include <gtest/gtest.h>

namespace {

class BrokenSetupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(false) << "deliberate suite setup failure"; }
};

TEST_F(BrokenSetupTest, WouldPass) { SUCCEED(); }
TEST_F(BrokenSetupTest, WouldAlsoPass) { SUCCEED(); }

}  // namespace
