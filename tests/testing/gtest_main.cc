// The main() every tessera GoogleTest binary links (cmake/Testing.cmake), in place of
// GTest::gtest_main. It adds one rule to GoogleTest: a test suite whose SetUpTestSuite failed
// fails the run. GoogleTest itself reports each test of such a suite as "[  SKIPPED ]", which
// CTest's SKIP_REGULAR_EXPRESSION turns into a skip with exit code 0 — a missing model or a
// server that did not start would read as green. Here the first test of that suite prints why
// and the process exits 1 before any SKIPPED line is written.
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

namespace {

class FailOnSuiteSetupFailure : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo& test) override {
    const ::testing::TestSuite* suite = ::testing::UnitTest::GetInstance()->current_test_suite();
    if (suite == nullptr || !suite->ad_hoc_test_result().Failed()) return;
    std::printf(
        "[  FAILED  ] %s.%s: SetUpTestSuite of %s failed (the failure is printed above); "
        "a failed suite setup fails the test run instead of skipping its tests "
        "(tests/testing/gtest_main.cc)\n",
        test.test_suite_name(), test.name(), test.test_suite_name());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(1);
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Appended after the default printer: it sees each test after "[ RUN      ]" is printed.
  ::testing::UnitTest::GetInstance()->listeners().Append(new FailOnSuiteSetupFailure);
  return RUN_ALL_TESTS();
}
