// The web console's embedded files (router/console/console_assets.h): "/" is index.html, each
// file of router/console/web/ is served at /console/NAME byte for byte as the tree holds it, with
// its content type; nothing else is.
#include "router/console/console_assets.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::router::console {
namespace {

using ::testing::HasSubstr;

std::string ReadSource(const std::string& name) {
  // Tests run from the repository root (cmake/Testing.cmake).
  std::ifstream in("router/console/web/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(ConsoleAssetsTest, EveryWebFileIsEmbeddedByteForByte) {
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator("router/console/web")) {
    const std::string name = entry.path().filename().string();
    const std::string path = name == "index.html" ? "/" : "/console/" + name;
    const std::optional<ConsoleAsset> asset = FindConsoleAsset(path);
    ASSERT_TRUE(asset.has_value()) << path;
    EXPECT_EQ(asset->body, ReadSource(name)) << path;
    ++files;
  }
  EXPECT_EQ(files, kConsoleFilesCount);
  EXPECT_GE(files, 3u);
}

TEST(ConsoleAssetsTest, ContentTypesFollowTheExtension) {
  EXPECT_EQ(FindConsoleAsset("/")->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(FindConsoleAsset("/console/console.js")->content_type,
            "text/javascript; charset=utf-8");
  EXPECT_EQ(FindConsoleAsset("/console/console.css")->content_type, "text/css; charset=utf-8");
  EXPECT_THAT(std::string(FindConsoleAsset("/")->body), HasSubstr("/console/console.js"));
}

TEST(ConsoleAssetsTest, OtherPathsAreNotAssets) {
  for (const char* path : {"/index.html", "/console/", "/console/../console.js", "/console",
                           "/console/missing.js", "/v1/models", "", "/console/console.js/"}) {
    EXPECT_FALSE(FindConsoleAsset(path).has_value()) << path;
  }
}

}  // namespace
}  // namespace tessera::router::console
