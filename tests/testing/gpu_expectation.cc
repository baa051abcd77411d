#include "tests/testing/gpu_expectation.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::testing_util {
namespace {

// /dev/nvidia[0-9]* (one node per GPU) or /dev/nvidiactl (the driver's control node); not
// nvidia-uvm or nvidia-modeset, which a driver can create without any GPU being usable here.
bool IsNvidiaDeviceNode(std::string_view name) {
  constexpr std::string_view kPrefix = "nvidia";
  if (name == "nvidiactl") return true;
  return name.size() > kPrefix.size() && name.substr(0, kPrefix.size()) == kPrefix &&
         std::isdigit(static_cast<unsigned char>(name[kPrefix.size()]));
}

std::vector<std::string> DevEntries() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", error)) {
    names.push_back(entry.path().filename().string());
  }
  return names;  // an unreadable /dev reads as no device nodes; $TESSERA_EXPECT_GPU still counts
}

}  // namespace

GpuExpectation DecideGpuExpectation(const char* expect_gpu_env,
                                    std::span<const std::string> dev_entries) {
  if (expect_gpu_env != nullptr && std::string_view(expect_gpu_env) == "1") {
    return {.expected = true, .why = "TESSERA_EXPECT_GPU=1"};
  }
  for (const std::string& name : dev_entries) {
    if (IsNvidiaDeviceNode(name)) return {.expected = true, .why = "/dev/" + name + " exists"};
  }
  return {};
}

GpuExpectation CurrentGpuExpectation() {
  const std::vector<std::string> entries = DevEntries();
  return DecideGpuExpectation(std::getenv("TESSERA_EXPECT_GPU"), entries);
}

void SkipOrFailWithoutGpu(std::string_view reason) {
  SkipOrFailWithoutGpu(reason, CurrentGpuExpectation());
}

void SkipOrFailWithoutGpu(std::string_view reason, const GpuExpectation& expectation) {
  if (!expectation.expected) GTEST_SKIP() << "no CUDA GPU: " << reason;
  GTEST_FAIL() << "a GPU is expected on this machine (" << expectation.why
               << ") but the test found none usable: " << reason;
}

}  // namespace tessera::testing_util
