// ParseClientJson (common/util/client_json.h): values up to the nesting cap parse; deeper ones are
// INVALID_ARGUMENT naming the top-level field, without recursing or crashing at any depth.
#include "common/util/client_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace tessera::util {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

std::string Arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(ClientJsonTest, ParsesUpToTheCap) {
  // The top-level object is level 1: 63 arrays under it make 64 levels.
  absl::StatusOr<nlohmann::json> at_cap = ParseClientJson(R"({"a": )" + Arrays(63) + "}");
  ASSERT_TRUE(at_cap.ok()) << at_cap.status();
  EXPECT_TRUE((*at_cap)["a"].is_array());
  ASSERT_TRUE(ParseClientJson(Arrays(kMaxClientJsonDepth)).ok());
  EXPECT_EQ(*ParseClientJson(R"({"x": [1, {"y": "[[[["}]})"),
            nlohmann::json::parse(R"({"x": [1, {"y": "[[[["}]})"))
      << "brackets inside strings do not count";
}

TEST(ClientJsonTest, OneLevelPastTheCapNamesTheField) {
  const absl::Status status = ParseClientJson(R"({"ok": [[1]], "deep": )" + Arrays(64) +
                                              R"(, "later": )" + Arrays(99) + "}")
                                  .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(status), "deep nests deeper than 64 levels") << "the first field that did";
  EXPECT_EQ(Message(ParseClientJson(Arrays(65)).status()), "body nests deeper than 64 levels");
  EXPECT_EQ(Message(ParseClientJson(Arrays(65), "tokenizer.json").status()),
            "tokenizer.json nests deeper than 64 levels");
  EXPECT_EQ(Message(ParseClientJson(R"({"a": [[[1]]]})", "body", 3).status()),
            "a nests deeper than 3 levels");
}

TEST(ClientJsonTest, HostileDepthsAreRefusedNotRecursedInto) {
  for (const int depth : {1000, 60000, 1000000}) {
    std::string objects;
    for (int i = 0; i < depth; ++i) objects += R"({"k": )";
    objects += "1";
    objects.append(depth, '}');
    EXPECT_THAT(Message(ParseClientJson(R"({"prompt": )" + Arrays(depth) + "}").status()),
                StartsWith("prompt nests deeper than 64"))
        << depth;
    EXPECT_THAT(Message(ParseClientJson(R"({"logit_bias": )" + objects + "}").status()),
                StartsWith("logit_bias nests deeper than 64"))
        << depth;
  }
}

TEST(ClientJsonTest, LongFieldNamesAreCutShort) {
  const std::string key(10000, 'k');
  const std::string message =
      Message(ParseClientJson("{\"" + key + "\": " + Arrays(80) + "}").status());
  EXPECT_EQ(message, std::string(64, 'k') + "... nests deeper than 64 levels");
}

TEST(ClientJsonTest, BadJsonKeepsItsError) {
  for (const std::string& body : {std::string(R"({"prompt": )"), std::string("[[[[[["),
                                  std::string(""), Arrays(100).substr(0, 150)}) {
    const absl::Status status = ParseClientJson(body).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_EQ(Message(status), "body is not valid JSON") << body;
  }
  EXPECT_THAT(Message(ParseClientJson("{", "tokenizer.json").status()),
              HasSubstr("tokenizer.json"));
}

}  // namespace
}  // namespace tessera::util
