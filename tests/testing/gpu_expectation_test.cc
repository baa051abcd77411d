// The rule that decides whether a GPU test may skip (gpu_expectation.h): which device nodes and
// which $TESSERA_EXPECT_GPU values make a GPU expected, the variable read in-process, and the two
// outcomes of SkipOrFailWithoutGpu (a skip with the allowlisted message, or a fatal failure that
// names the CUDA error).
#include "tests/testing/gpu_expectation.h"

#include <glob.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

namespace tessera::testing_util {
namespace {

using ::testing::HasSubstr;

TEST(GpuExpectation, DeviceNodesOfTheDriverMakeAGpuExpected) {
  using Names = std::vector<std::string>;
  EXPECT_FALSE(DecideGpuExpectation(nullptr, Names{}).expected);
  EXPECT_FALSE(DecideGpuExpectation(nullptr, Names{"null", "nvidia", "nvidia-uvm",
                                                   "nvidia-modeset", "nvidia-caps"})
                   .expected);
  const GpuExpectation first = DecideGpuExpectation(nullptr, Names{"tty0", "nvidia0"});
  EXPECT_TRUE(first.expected);
  EXPECT_EQ(first.why, "/dev/nvidia0 exists");
  EXPECT_TRUE(DecideGpuExpectation(nullptr, Names{"nvidia12"}).expected);
  EXPECT_TRUE(DecideGpuExpectation(nullptr, Names{"nvidiactl"}).expected);
}

TEST(GpuExpectation, OnlyTheValueOneOfTheVariableMakesAGpuExpected) {
  const std::vector<std::string> none;
  const GpuExpectation set = DecideGpuExpectation("1", none);
  EXPECT_TRUE(set.expected);
  EXPECT_EQ(set.why, "TESSERA_EXPECT_GPU=1");
  for (const char* value : {"0", "", "yes", "true"}) {
    EXPECT_FALSE(DecideGpuExpectation(value, none).expected) << "TESSERA_EXPECT_GPU=" << value;
  }
  // "0" does not override the device nodes: a machine with a GPU always expects it.
  EXPECT_TRUE(DecideGpuExpectation("0", std::vector<std::string>{"nvidia0"}).expected);
}

// Restores $TESSERA_EXPECT_GPU as it was when the test started.
class ExpectGpuVariable : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* value = std::getenv("TESSERA_EXPECT_GPU")) saved_ = value;
  }
  void TearDown() override {
    if (saved_) {
      setenv("TESSERA_EXPECT_GPU", saved_->c_str(), 1);
    } else {
      unsetenv("TESSERA_EXPECT_GPU");
    }
  }
  std::optional<std::string> saved_;
};

// An independent reading of the same rule: the shell glob of the device nodes.
bool DriverNodesExist() {
  glob_t found{};
  const bool any = glob("/dev/nvidia[0-9]*", 0, nullptr, &found) == 0 && found.gl_pathc > 0;
  globfree(&found);
  return any || access("/dev/nvidiactl", F_OK) == 0;
}

TEST_F(ExpectGpuVariable, IsReadFromThisProcessesEnvironment) {
  ASSERT_EQ(setenv("TESSERA_EXPECT_GPU", "1", 1), 0);
  const GpuExpectation set = CurrentGpuExpectation();
  EXPECT_TRUE(set.expected);
  EXPECT_EQ(set.why, "TESSERA_EXPECT_GPU=1");
  ASSERT_EQ(unsetenv("TESSERA_EXPECT_GPU"), 0);
  EXPECT_EQ(CurrentGpuExpectation().expected, DriverNodesExist());
}

TEST(SkipOrFailWithoutGpu, SkipsWithTheAllowlistedMessageWhenNoGpuIsExpected) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    SkipOrFailWithoutGpu("no usable CUDA device: cudaErrorNoDevice (no CUDA-capable device)",
                         GpuExpectation{});
  }
  ASSERT_EQ(results.size(), 1);
  const ::testing::TestPartResult& result = results.GetTestPartResult(0);
  EXPECT_TRUE(result.skipped());
  EXPECT_THAT(result.message(), HasSubstr("no CUDA GPU: no usable CUDA device: cudaErrorNoDevice"));
}

TEST(SkipOrFailWithoutGpu, FailsNamingTheErrorWhenAGpuIsExpected) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    SkipOrFailWithoutGpu("cudaErrorInsufficientDriver (CUDA driver version is insufficient)",
                         GpuExpectation{.expected = true, .why = "TESSERA_EXPECT_GPU=1"});
  }
  ASSERT_EQ(results.size(), 1);
  const ::testing::TestPartResult& result = results.GetTestPartResult(0);
  EXPECT_TRUE(result.fatally_failed());
  EXPECT_THAT(result.message(), HasSubstr("cudaErrorInsufficientDriver"));
  EXPECT_THAT(result.message(), HasSubstr("TESSERA_EXPECT_GPU=1"));
}

}  // namespace
}  // namespace tessera::testing_util
