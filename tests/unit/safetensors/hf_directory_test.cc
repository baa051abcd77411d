// HF directories: model.safetensors or an index with its shards, and every inconsistency between
// the index and the shards as an error naming the file and tensor.
#include "common/safetensors/hf_directory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/safetensors/safetensors_writer.h"
#include "tests/unit/safetensors/safetensors_test_util.h"

namespace tessera::safetensors {
namespace {

using ::testing::HasSubstr;

void WriteShard(const std::string& path, const std::vector<std::string>& names) {
  SafetensorsWriter writer;
  for (const std::string& name : names)
    writer.Add(name, Dtype::kU8, {2}, std::vector<uint8_t>{1, 2});
  ASSERT_TRUE(writer.WriteToFile(path).ok());
}

// config.json, two shards (a, b in the first; c in the second) and an index listing `map`.
std::string ShardedDir(const std::string& tag, const std::string& map) {
  const std::string dir = testing::FreshDir("hfdir_" + tag);
  testing::WriteText(dir + "/config.json", R"({"architectures": ["LlamaForCausalLM"]})");
  WriteShard(dir + "/model-00001-of-00002.safetensors", {"a", "b"});
  WriteShard(dir + "/model-00002-of-00002.safetensors", {"c"});
  testing::WriteText(dir + "/model.safetensors.index.json",
                     R"({"metadata": {"total_size": 6}, "weight_map": )" + map + "}");
  return dir;
}

constexpr char kGoodMap[] =
    R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
        "c": "model-00002-of-00002.safetensors"})";

TEST(HfDirectoryTest, OpensEveryShardOfTheIndex) {
  const std::string dir = ShardedDir("good", kGoodMap);
  EXPECT_TRUE(IsHfModelDirectory(dir));
  absl::StatusOr<std::unique_ptr<HfDirectory>> hf = HfDirectory::Open(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ((*hf)->shards().size(), 2u);
  for (const char* name : {"a", "b", "c"}) {
    const SafetensorsTensor* t = (*hf)->Find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->name, name);
  }
  EXPECT_EQ((*hf)->config()["architectures"][0], "LlamaForCausalLM");
}

TEST(HfDirectoryTest, ASingleFileNeedsNoIndex) {
  const std::string dir = testing::FreshDir("hfdir_single");
  testing::WriteText(dir + "/config.json", "{}");
  WriteShard(dir + "/model.safetensors", {"x"});
  absl::StatusOr<std::unique_ptr<HfDirectory>> hf = HfDirectory::Open(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_NE((*hf)->Find("x"), nullptr);
}

TEST(HfDirectoryTest, IndexAndShardsThatDisagreeAreErrorsNamingFileAndTensor) {
  struct Case {
    const char* label;
    std::string map;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"missing_shard",
       R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
           "c": "model-00003-of-00002.safetensors"})",
       "model-00003-of-00002.safetensors"},
      {"lacks_tensor",
       R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
           "c": "model-00002-of-00002.safetensors", "d": "model-00002-of-00002.safetensors"})",
       "places tensor 'd' in model-00002-of-00002.safetensors, which does not hold it"},
      {"wrong_shard",
       R"({"a": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
           "c": "model-00002-of-00002.safetensors"})",
       "places tensor 'a' in model-00002-of-00002.safetensors, which does not hold it"},
      {"unlisted",
       R"({"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"})",
       "shard model-00001-of-00002.safetensors holds tensor 'b', which "
       "model.safetensors.index.json does not list"},
      {"path_in_map", R"({"a": "../model-00001-of-00002.safetensors"})",
       "weight_map places tensor 'a' in \"../model-00001-of-00002.safetensors\", which is not a "
       "file name in the directory"},
      {"no_weight_map", R"("nothing")", "no weight_map object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string dir = ShardedDir(c.label, c.map);
    absl::StatusOr<std::unique_ptr<HfDirectory>> hf = HfDirectory::Open(dir);
    ASSERT_FALSE(hf.ok());
    EXPECT_THAT(hf.status().message(), HasSubstr(c.message));
    EXPECT_THAT(hf.status().message(), HasSubstr(dir));
  }
}

TEST(HfDirectoryTest, ATensorInTwoShardsIsAnError) {
  const std::string dir = ShardedDir("twice", kGoodMap);
  WriteShard(dir + "/model-00002-of-00002.safetensors", {"c", "a"});
  absl::StatusOr<std::unique_ptr<HfDirectory>> hf = HfDirectory::Open(dir);
  ASSERT_FALSE(hf.ok());
  EXPECT_EQ(hf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(hf.status().message(),
              HasSubstr("tensor 'a' is in two shards, model-00001-of-00002.safetensors and "
                        "model-00002-of-00002.safetensors"));
}

TEST(HfDirectoryTest, AMissingShardIsNotFound) {
  const std::string dir = ShardedDir("gone", kGoodMap);
  std::filesystem::remove(dir + "/model-00002-of-00002.safetensors");
  absl::StatusOr<std::unique_ptr<HfDirectory>> hf = HfDirectory::Open(dir);
  ASSERT_FALSE(hf.ok());
  EXPECT_EQ(hf.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(hf.status().message(), HasSubstr("model-00002-of-00002.safetensors"));
}

TEST(HfDirectoryTest, MissingConfigOrWeightsAreNotFound) {
  const std::string no_config = testing::FreshDir("hfdir_no_config");
  EXPECT_FALSE(IsHfModelDirectory(no_config));
  EXPECT_EQ(HfDirectory::Open(no_config).status().code(), absl::StatusCode::kNotFound);
  const std::string no_weights = testing::FreshDir("hfdir_no_weights");
  testing::WriteText(no_weights + "/config.json", "{}");
  absl::StatusOr<std::unique_ptr<HfDirectory>> hf = HfDirectory::Open(no_weights);
  ASSERT_FALSE(hf.ok());
  EXPECT_EQ(hf.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(hf.status().message(), HasSubstr("neither model.safetensors nor"));
  testing::WriteText(no_weights + "/config.json", "{not json");
  EXPECT_THAT(HfDirectory::Open(no_weights).status().message(),
              HasSubstr("config.json is not valid JSON"));
}

}  // namespace
}  // namespace tessera::safetensors
