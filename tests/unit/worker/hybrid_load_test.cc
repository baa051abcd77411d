// LoadModel on hybrid Gated-DeltaNet files (issue 30): a malformed file is one error naming the
// key or tensor, before any weight is bound; a well-formed one passes the checks and is refused
// only because no runner serves hybrids yet (that refusal names the architecture).
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/tiny_hybrid_gguf.h"
#include "worker/loaded_model.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

TEST(HybridLoadTest, AMissingTensorIsOneErrorNamingIt) {
  testing_util::TinyHybridGguf file("qwen35moe");
  file.RemoveTensor("blk.1.ssm_a");
  const std::string path = TempPath("no_ssm_a.gguf");
  ASSERT_TRUE(file.WriteToFile(path).ok());
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(path);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("blk.1.ssm_a: missing"));
}

TEST(HybridLoadTest, AZeroConvKernelIsOneErrorNamingTheKey) {
  testing_util::TinyHybridGguf file("qwen3next");
  file.SetUint32("qwen3next.ssm.conv_kernel", 0);
  const std::string path = TempPath("conv0.gguf");
  ASSERT_TRUE(file.WriteToFile(path).ok());
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(path);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("ssm.conv_kernel"));
}

TEST(HybridLoadTest, AWellFormedFileIsRefusedOnlyForItsArchitecture) {
  absl::StatusOr<std::unique_ptr<LoadedModel>> model =
      LoadModel("tests/data/hybrid/tiny-qwen35.gguf");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("architecture 'qwen35' is not supported"));
}

}  // namespace
}  // namespace tessera::worker
