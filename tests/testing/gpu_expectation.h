// Whether a GPU test may skip. A GPU test skips ("no CUDA GPU: <reason>", which
// tests/skip_allowlist.txt accepts for `Cuda*` and `gpu_*` tests) only on a machine that is not
// expected to have a GPU. A machine is expected to have one when the NVIDIA driver's device nodes
// exist (/dev/nvidia0, /dev/nvidia1, ..., /dev/nvidiactl) or when $TESSERA_EXPECT_GPU is "1" (for
// a run meant for a GPU, e.g. in a container whose device nodes are named differently: it cannot
// pass by skipping). There every "no GPU" outcome (no device, insufficient driver, a build
// without CUDA) is a test failure naming the reason: a GPU run that skips everything would
// otherwise read as green.
//
// Tests (not libraries) read the environment here: DESIGN.md §10 keeps configuration out of the
// environment inside classes.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace tessera::testing_util {

struct GpuExpectation {
  bool expected = false;
  std::string why;  // what made the machine expected to have a GPU ("" when it is not)
};

// The decision from its inputs: `expect_gpu_env` is $TESSERA_EXPECT_GPU (nullptr when unset),
// `dev_entries` the names in /dev. Only "1" sets the expectation; any other value leaves it to
// the device nodes.
GpuExpectation DecideGpuExpectation(const char* expect_gpu_env,
                                    std::span<const std::string> dev_entries);

// The decision for this process: $TESSERA_EXPECT_GPU and /dev as they are now.
GpuExpectation CurrentGpuExpectation();

// The outcome of a GPU test that found no usable GPU for `reason` (which names the CUDA error
// when there is one): a skip with "no CUDA GPU: <reason>" when no GPU is expected, otherwise a
// fatal failure with the reason and why a GPU was expected. Like ASSERT_*, it returns from this
// function only: call it from SetUp() or the test body and return right after it.
void SkipOrFailWithoutGpu(std::string_view reason);
// The same for a given expectation (its own test drives both outcomes on any machine).
void SkipOrFailWithoutGpu(std::string_view reason, const GpuExpectation& expectation);

}  // namespace tessera::testing_util
